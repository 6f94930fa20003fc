using System;
using System.Collections.Generic;
using System.Diagnostics.CodeAnalysis;
using System.IO;
using System.Net.Security;
using System.Security.Cryptography.X509Certificates;
using System.Text;

namespace Ticketing
{
    /// <summary>
    /// One of the four TLS modes: Off (the default), SystemRoots, Ca(file) and
    /// InsecureSkipVerify (tests only), optionally with a client certificate
    /// for mutual TLS (WithClientCert). Files are read when the broker is
    /// built (Connect): a missing or unreadable file is an
    /// ArgumentException there.
    /// </summary>
    public sealed class TlsMode
    {
        internal enum Kind { Off, SystemRoots, Ca, Insecure }

        internal readonly Kind Mode;
        internal readonly string CaFile;
        internal readonly string ClientPkcs12;
        internal readonly string ClientPassword;
        internal readonly string ClientCertPem;
        internal readonly string ClientKeyPem;

        TlsMode(Kind k, string ca, string p12, string pw, string certPem, string keyPem)
        {
            Mode = k; CaFile = ca; ClientPkcs12 = p12; ClientPassword = pw; ClientCertPem = certPem; ClientKeyPem = keyPem;
        }

        /// <summary>Plain TCP (the default).</summary>
        public static TlsMode Off { get { return new TlsMode(Kind.Off, null, null, null, null, null); } }

        /// <summary>TLS verified against the system's trusted roots and the server's host name.</summary>
        public static TlsMode SystemRoots { get { return new TlsMode(Kind.SystemRoots, null, null, null, null, null); } }

        /// <summary>TLS without any verification of the server's certificate. For tests only.</summary>
        public static TlsMode InsecureSkipVerify { get { return new TlsMode(Kind.Insecure, null, null, null, null, null); } }

        /// <summary>TLS verified against the CA certificate(s) in a PEM (or DER) file, and the server's host name or IP (checked by the client itself, RFC 6125).</summary>
        /// <param name="caFile">The CA file's path; read by TicketBrokerBuilder.Connect.</param>
        /// <returns>The mode.</returns>
        /// <exception cref="ArgumentNullException">caFile is null.</exception>
        /// <exception cref="ArgumentException">caFile is empty.</exception>
        public static TlsMode Ca(string caFile)
        {
            if (caFile == null) throw new ArgumentNullException("caFile");
            if (caFile.Length == 0) throw new ArgumentException("ticketing: TlsMode.Ca needs the path of a CA certificate file", "caFile");
            return new TlsMode(Kind.Ca, caFile, null, null, null, null);
        }

        /// <summary>
        /// This mode presenting a client certificate (mutual TLS) from a
        /// PKCS#12 (.pfx/.p12) file holding the certificate and its private
        /// key. Works on every target (netstandard2.0, Mono). Not valid on Off.
        /// </summary>
        /// <param name="pkcs12File">The PKCS#12 file's path; read by TicketBrokerBuilder.Connect.</param>
        /// <param name="password">Its password; null for none.</param>
        /// <returns>A new mode with the client certificate.</returns>
        /// <exception cref="ArgumentNullException">pkcs12File is null.</exception>
        /// <exception cref="InvalidOperationException">This mode is Off.</exception>
        public TlsMode WithClientCert(string pkcs12File, [AllowNull] string password)
        {
            if (pkcs12File == null) throw new ArgumentNullException("pkcs12File");
            if (Mode == Kind.Off) throw new InvalidOperationException("ticketing: a client certificate needs TLS; TlsMode.Off cannot present one");
            return new TlsMode(Mode, CaFile, pkcs12File, password ?? "", null, null);
        }

#if NET5_0_OR_GREATER
        /// <summary>
        /// This mode presenting a client certificate from PEM files (certificate
        /// and private key), as ticketd's own files are. .NET 5 and later only;
        /// on netstandard2.0 use the PKCS#12 overload.
        /// </summary>
        /// <param name="certFile">The certificate's PEM file.</param>
        /// <param name="keyFile">The private key's PEM file.</param>
        /// <returns>A new mode with the client certificate.</returns>
        /// <exception cref="ArgumentNullException">certFile or keyFile is null.</exception>
        /// <exception cref="InvalidOperationException">This mode is Off.</exception>
        public TlsMode WithClientCertPem(string certFile, string keyFile)
        {
            if (certFile == null) throw new ArgumentNullException("certFile");
            if (keyFile == null) throw new ArgumentNullException("keyFile");
            if (Mode == Kind.Off) throw new InvalidOperationException("ticketing: a client certificate needs TLS; TlsMode.Off cannot present one");
            return new TlsMode(Mode, CaFile, null, null, certFile, keyFile);
        }
#endif

        /// <summary>The mode in words, for logs.</summary>
        /// <returns>"TLS (CA file ca.crt) with a client certificate" and the like.</returns>
        public override string ToString()
        {
            string s;
            switch (Mode)
            {
                case Kind.SystemRoots: s = "TLS (system roots)"; break;
                case Kind.Ca: s = "TLS (CA file " + CaFile + ")"; break;
                case Kind.Insecure: s = "TLS (no verification)"; break;
                default: s = "no TLS"; break;
            }
            if (ClientPkcs12 != null || ClientCertPem != null) s += " with a client certificate";
            return s;
        }

        /// <summary>The TLS settings, with files loaded; null for Off.</summary>
        internal TlsSettings Build()
        {
            bool hasClient = ClientPkcs12 != null || ClientCertPem != null;
            if (Mode == Kind.Off)
            {
                if (hasClient) throw new InvalidOperationException("ticketing: a client certificate needs TLS; TlsMode.Off cannot present one");
                return null;
            }
            var st = new TlsSettings { Mode = Mode };
            if (Mode == Kind.Ca)
            {
                st.Cas = LoadCertificates(CaFile);
            }
            if (ClientPkcs12 != null)
            {
                try
                {
                    st.Client = new X509Certificate2(File.ReadAllBytes(ClientPkcs12), ClientPassword,
                        X509KeyStorageFlags.Exportable);
                }
                catch (Exception e)
                {
                    throw new ArgumentException("ticketing: cannot load the client certificate " + ClientPkcs12 + " (PKCS#12 with its private key expected): " + e.Message, "pkcs12File", e);
                }
                if (!st.Client.HasPrivateKey)
                    throw new ArgumentException("ticketing: the client certificate file " + ClientPkcs12 + " holds no private key", "pkcs12File");
            }
#if NET5_0_OR_GREATER
            if (ClientCertPem != null)
            {
                try
                {
                    var pem = X509Certificate2.CreateFromPemFile(ClientCertPem, ClientKeyPem);
                    // Round-trip through PKCS#12 so SslStream can use the key on every platform.
                    st.Client = new X509Certificate2(pem.Export(X509ContentType.Pkcs12));
                }
                catch (Exception e)
                {
                    throw new ArgumentException("ticketing: cannot load the client certificate " + ClientCertPem + " with key " + ClientKeyPem + ": " + e.Message, "certFile", e);
                }
            }
#endif
            return st;
        }

        static List<X509Certificate2> LoadCertificates(string path)
        {
            byte[] raw;
            try { raw = File.ReadAllBytes(path); }
            catch (Exception e)
            {
                throw new ArgumentException("ticketing: cannot read the CA file " + path + ": " + e.Message, "caFile", e);
            }
            var list = new List<X509Certificate2>();
            var text = Encoding.ASCII.GetString(raw);
            const string begin = "-----BEGIN CERTIFICATE-----", end = "-----END CERTIFICATE-----";
            int at = 0;
            try
            {
                while ((at = text.IndexOf(begin, at, StringComparison.Ordinal)) >= 0)
                {
                    int stop = text.IndexOf(end, at, StringComparison.Ordinal);
                    if (stop < 0) break;
                    var b64 = text.Substring(at + begin.Length, stop - at - begin.Length);
                    list.Add(new X509Certificate2(Convert.FromBase64String(b64.Replace("\r", "").Replace("\n", "").Trim())));
                    at = stop + end.Length;
                }
                if (list.Count == 0 && raw.Length > 0 && raw[0] == 0x30) list.Add(new X509Certificate2(raw)); // DER
            }
            catch (Exception e)
            {
                throw new ArgumentException("ticketing: the CA file " + path + " holds an unreadable certificate: " + e.Message, "caFile", e);
            }
            if (list.Count == 0)
                throw new ArgumentException("ticketing: the CA file " + path + " holds no certificate (PEM or DER expected)", "caFile");
            return list;
        }
    }

    /// <summary>Loaded TLS configuration.</summary>
    internal sealed class TlsSettings
    {
        internal TlsMode.Kind Mode;
        internal List<X509Certificate2> Cas;
        internal X509Certificate2 Client;

        /// <summary>The server certificate check of this mode.</summary>
        internal bool Validate(string host, X509Certificate cert, X509Chain chain, SslPolicyErrors errors, out string why)
        {
            why = null;
            if (Mode == TlsMode.Kind.Insecure) return true;
            if (cert == null || (errors & SslPolicyErrors.RemoteCertificateNotAvailable) != 0)
            {
                why = "the server sent no certificate";
                return false;
            }
            var leaf = cert as X509Certificate2 ?? new X509Certificate2(cert);
            // The name is checked here whatever the runtime reported: Mono,
            // for one, never reports a name mismatch alongside chain errors.
            var mismatch = ServerName.Mismatch(leaf, host);
            if (mismatch != null)
            {
                why = "the server certificate does not match the address " + host + ": " + mismatch;
                return false;
            }
            if (Mode == TlsMode.Kind.SystemRoots)
            {
                if (errors == SslPolicyErrors.None) return true;
                why = "the server certificate is not trusted by the system roots or does not match the address (" + errors + ")";
                return false;
            }
            // CA file: the chain must end at one of the given CAs.
            if ((errors & SslPolicyErrors.RemoteCertificateNameMismatch) != 0)
            {
                why = "the server certificate does not match the address " + host + " (" + errors + ")";
                return false;
            }
            foreach (var ca in Cas)
                if (ca.Thumbprint == leaf.Thumbprint) return true;
            using (var ch = new X509Chain())
            {
                ch.ChainPolicy.RevocationMode = X509RevocationMode.NoCheck;
                ch.ChainPolicy.VerificationFlags = X509VerificationFlags.AllowUnknownCertificateAuthority;
                foreach (var ca in Cas) ch.ChainPolicy.ExtraStore.Add(ca);
                ch.Build(leaf);
                foreach (X509ChainStatus s in ch.ChainStatus)
                {
                    if (s.Status != X509ChainStatusFlags.UntrustedRoot && s.Status != X509ChainStatusFlags.NoError
                        && s.Status != X509ChainStatusFlags.PartialChain)
                    {
                        why = "the server certificate chain is invalid: " + s.Status + " " + s.StatusInformation;
                        return false;
                    }
                }
                var els = ch.ChainElements;
                if (els.Count > 0)
                {
                    var root = els[els.Count - 1].Certificate;
                    foreach (var ca in Cas)
                        if (ca.Thumbprint == root.Thumbprint) return true;
                }
            }
            why = "the server certificate is not signed by a CA of the configured CA file";
            return false;
        }
    }
}
