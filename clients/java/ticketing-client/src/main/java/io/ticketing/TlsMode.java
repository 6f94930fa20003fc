package io.ticketing;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collection;
import java.util.List;
import javax.net.ssl.KeyManager;
import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManager;
import javax.net.ssl.TrustManagerFactory;
import javax.net.ssl.X509TrustManager;

/**
 * One of the four TLS modes: off (the default), the system's trusted roots, a
 * CA file, or no verification at all (tests only). Add a client certificate
 * with {@link #withClientCert(String, String)} for servers that require one
 * (mutual TLS).
 *
 * <p>Java: {@code TlsMode.systemRoots()}, {@code TlsMode.ca("ca.crt")},
 * {@code TlsMode.insecureSkipVerify()}. Kotlin may also write
 * {@code TlsMode.SystemRoots}, {@code TlsMode.Ca("ca.crt")} and
 * {@code TlsMode.InsecureSkipVerify}.
 */
public sealed class TlsMode permits TlsMode.Ca {
    private enum Kind { OFF, SYSTEM, CA, INSECURE }

    /** Plain TCP. */
    public static final TlsMode Off = new TlsMode(Kind.OFF, null, null, null);
    /** TLS verified against the JVM's default trusted roots. */
    public static final TlsMode SystemRoots = new TlsMode(Kind.SYSTEM, null, null, null);
    /** TLS without any verification of the server certificate: for tests only. */
    public static final TlsMode InsecureSkipVerify = new TlsMode(Kind.INSECURE, null, null, null);

    private final Kind kind;
    private final String caFile;
    private final String certFile;
    private final String keyFile;

    private TlsMode(Kind kind, String caFile, String certFile, String keyFile) {
        this.kind = kind;
        this.caFile = caFile;
        this.certFile = certFile;
        this.keyFile = keyFile;
    }

    /**
     * Plain TCP (the default).
     *
     * @return the mode
     */
    public static TlsMode off() {
        return Off;
    }

    /**
     * TLS verified against the JVM's default trusted roots.
     *
     * @return the mode
     */
    public static TlsMode systemRoots() {
        return SystemRoots;
    }

    /**
     * TLS verified against the CA certificates in a PEM file, read by {@code connect()}.
     *
     * @param caFile the PEM file's path
     * @return the mode
     */
    public static TlsMode ca(String caFile) {
        return new Ca(caFile);
    }

    /**
     * TLS without verification of the server's certificate. Tests only: no protection against an attacker.
     *
     * @return the mode
     */
    public static TlsMode insecureSkipVerify() {
        return InsecureSkipVerify;
    }

    /** TLS verified against the CA certificates in a PEM file (Kotlin: {@code TlsMode.Ca("ca.crt")}). */
    public static final class Ca extends TlsMode {
        /**
         * TLS verified against the CA certificates in caFile.
         *
         * @param caFile the PEM file's path
         */
        public Ca(String caFile) {
            super(Kind.CA, caFile, null, null);
        }

        private Ca(String caFile, String certFile, String keyFile) {
            super(Kind.CA, caFile, certFile, keyFile);
        }
    }

    /**
     * This mode presenting the client certificate in {@code certFile} with its
     * private key in {@code keyFile} (PEM; the key in PKCS#8, "BEGIN PRIVATE
     * KEY", RSA or EC) to servers that require one. A configuration error on
     * {@link #off()}. The files are read by {@code connect()}.
     * @param certFile the client certificate's PEM file
     * @param keyFile its private key's PEM file (PKCS#8)
     * @return this mode with the client certificate
     */
    public TlsMode withClientCert(String certFile, String keyFile) {
        if (kind == Kind.OFF) {
            throw new InvalidArgumentException("a client certificate needs TLS: choose systemRoots(), ca(...) or insecureSkipVerify() first");
        }
        if (kind == Kind.CA) {
            return new Ca(caFile, certFile, keyFile);
        }
        return new TlsMode(kind, null, certFile, keyFile);
    }

    boolean enabled() {
        return kind != Kind.OFF;
    }

    boolean hasClientCert() {
        return certFile != null;
    }

    boolean verifiesHost() {
        return kind == Kind.SYSTEM || kind == Kind.CA;
    }

    @Override
    public String toString() {
        String s = switch (kind) {
            case OFF -> "off";
            case SYSTEM -> "system roots";
            case CA -> "CA file " + caFile;
            case INSECURE -> "insecure (no verification)";
        };
        return certFile == null ? s : s + " with client certificate " + certFile;
    }

    /** The SSLContext of this mode, or null when TLS is off. Configuration errors are InvalidArgumentException. */
    SSLContext build() {
        if (kind == Kind.OFF) {
            return null;
        }
        try {
            TrustManager[] tms = switch (kind) {
                case SYSTEM -> null;
                case INSECURE -> new TrustManager[] {new TrustAll()};
                case CA -> {
                    KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
                    ks.load(null, null);
                    Collection<? extends Certificate> certs;
                    try (InputStream in = Files.newInputStream(Path.of(caFile))) {
                        certs = CertificateFactory.getInstance("X.509").generateCertificates(in);
                    }
                    if (certs.isEmpty()) {
                        throw new InvalidArgumentException("the CA file " + caFile + " holds no certificate");
                    }
                    int i = 0;
                    for (Certificate c : certs) {
                        ks.setCertificateEntry("ca" + i++, c);
                    }
                    TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
                    tmf.init(ks);
                    yield tmf.getTrustManagers();
                }
                default -> throw new IllegalStateException();
            };
            KeyManager[] kms = null;
            if (certFile != null) {
                kms = clientKeyManagers();
            }
            SSLContext ctx = SSLContext.getInstance("TLS");
            ctx.init(kms, tms, null);
            return ctx;
        } catch (IOException | GeneralSecurityException e) {
            throw new InvalidArgumentException("TLS configuration (" + this + ") cannot be used: " + e.getMessage(), e, 0);
        }
    }

    private KeyManager[] clientKeyManagers() throws IOException, GeneralSecurityException {
        List<Certificate> chain = new ArrayList<>();
        try (InputStream in = Files.newInputStream(Path.of(certFile))) {
            chain.addAll(CertificateFactory.getInstance("X.509").generateCertificates(in));
        }
        if (chain.isEmpty()) {
            throw new InvalidArgumentException("the client certificate file " + certFile + " holds no certificate");
        }
        String pem = Files.readString(Path.of(keyFile), StandardCharsets.US_ASCII);
        int b = pem.indexOf("-----BEGIN PRIVATE KEY-----");
        int e = pem.indexOf("-----END PRIVATE KEY-----");
        if (b < 0 || e < b) {
            throw new InvalidArgumentException("the key file " + keyFile + " holds no PKCS#8 \"PRIVATE KEY\" block (convert it with: openssl pkcs8 -topk8 -nocrypt)");
        }
        byte[] der = Base64.getMimeDecoder().decode(pem.substring(b + 27, e));
        String alg = ((X509Certificate) chain.get(0)).getPublicKey().getAlgorithm();
        PrivateKey key = KeyFactory.getInstance(alg).generatePrivate(new PKCS8EncodedKeySpec(der));
        KeyStore ks = KeyStore.getInstance(KeyStore.getDefaultType());
        ks.load(null, null);
        char[] pw = new char[0];
        ks.setKeyEntry("client", key, pw, chain.toArray(new Certificate[0]));
        KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
        kmf.init(ks, pw);
        return kmf.getKeyManagers();
    }

    private static final class TrustAll implements X509TrustManager {
        @Override
        public void checkClientTrusted(X509Certificate[] chain, String authType) {}

        @Override
        public void checkServerTrusted(X509Certificate[] chain, String authType) {}

        @Override
        public X509Certificate[] getAcceptedIssuers() {
            return new X509Certificate[0];
        }
    }
}
