package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * TLS and mutual TLS against real ticketd processes, with a throwaway CA,
 * server and client certificates made by openssl.
 */
@Timeout(120)
class TlsIntegrationTest {
    @TempDir
    static Path dir;

    static void openssl(String... args) throws Exception {
        List<String> cmd = new java.util.ArrayList<>(List.of("openssl"));
        cmd.addAll(List.of(args));
        Process p = new ProcessBuilder(cmd).directory(dir.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes());
        if (!p.waitFor(60, TimeUnit.SECONDS) || p.exitValue() != 0) {
            throw new AssertionError("openssl " + String.join(" ", args) + " failed (install openssl):\n" + out);
        }
    }

    @BeforeAll
    static void certificates() throws Exception {
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
                "-subj", "/CN=test-ca", "-keyout", "ca.key", "-out", "ca.crt");
        for (String who : new String[] {"server", "client"}) {
            openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", who + ".key");
            openssl("req", "-new", "-key", who + ".key", "-subj", "/CN=" + who, "-out", who + ".csr");
            java.nio.file.Files.writeString(dir.resolve(who + ".ext"), who.equals("server")
                    ? "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
                    : "extendedKeyUsage=clientAuth\n");
            openssl("x509", "-req", "-in", who + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
                    "-days", "2", "-extfile", who + ".ext", "-out", who + ".crt");
        }
    }

    static String f(String name) {
        return dir.resolve(name).toString();
    }

    @Test
    void tlsVerifiedAgainstACaFileAndInsecureMode() throws Exception {
        try (Ticketd t = new Ticketd(1, "-tls-cert", f("server.crt"), "-tls-key", f("server.key"))) {
            String addr = t.nodes.get(0).addr;
            try (TicketBroker b = TicketBroker.builder().addrs(addr).tls(TlsMode.ca(f("ca.crt"))).connect()) {
                b.waitReadyBlocking(Duration.ofSeconds(30));
                b.acquireBlocking("tls", Duration.ZERO, Duration.ofSeconds(5), Duration.ZERO).releaseBlocking();
            }
            try (TicketBroker b = TicketBroker.builder().addrs(addr).tls(TlsMode.insecureSkipVerify()).connect()) {
                b.waitReadyBlocking(Duration.ofSeconds(30));
            }
            // TLS on one side only is reported promptly, saying so.
            try (TicketBroker b = TicketBroker.builder().addrs(addr).connect()) {
                UnavailableException e = assertThrows(UnavailableException.class, () -> b.waitReadyBlocking(Duration.ofSeconds(30)));
                assertTrue(e.getMessage().contains("TLS"), e.getMessage());
            }
            // The JVM's default roots do not trust the test CA: refused promptly, not a timeout.
            try (TicketBroker b = TicketBroker.builder().addrs(addr).tls(TlsMode.systemRoots()).connect()) {
                UnavailableException e = assertThrows(UnavailableException.class, () -> b.waitReadyBlocking(Duration.ofSeconds(30)));
                assertTrue(e.getMessage().contains("TLS"), e.getMessage());
            }
        }
    }

    @Test
    void tlsClientAgainstAPlainServerIsReportedPromptly() throws Exception {
        try (Ticketd t = new Ticketd(1)) {
            String addr = t.awaitLeader(30_000).addr;
            try (TicketBroker b = TicketBroker.builder().addrs(addr).tls(TlsMode.insecureSkipVerify()).connect()) {
                UnavailableException e = assertThrows(UnavailableException.class, () -> b.waitReadyBlocking(Duration.ofSeconds(30)));
                assertTrue(e.getMessage().contains("TLS"), e.getMessage());
            }
        }
    }

    @Test
    void mutualTls() throws Exception {
        try (Ticketd t = new Ticketd(1, "-tls-cert", f("server.crt"), "-tls-key", f("server.key"), "-tls-client-ca", f("ca.crt"))) {
            String addr = t.nodes.get(0).addr;
            try (TicketBroker b = TicketBroker.builder().addrs(addr)
                    .tls(TlsMode.ca(f("ca.crt")).withClientCert(f("client.crt"), f("client.key"))).connect()) {
                b.waitReadyBlocking(Duration.ofSeconds(30));
                b.acquireBlocking("mtls", Duration.ZERO, Duration.ofSeconds(5), Duration.ZERO).releaseBlocking();
            }
            try (TicketBroker b = TicketBroker.builder().addrs(addr).tls(TlsMode.ca(f("ca.crt"))).connect()) {
                // Without a client certificate: refused promptly.
                UnauthenticatedException e = assertThrows(UnauthenticatedException.class, () -> b.waitReadyBlocking(Duration.ofSeconds(30)));
                assertTrue(e.getMessage().contains("certificate"), e.getMessage());
            }
        }
        assertThrows(InvalidArgumentException.class, () -> TlsMode.off().withClientCert("a", "b"));
        assertThrows(InvalidArgumentException.class,
                () -> TicketBroker.builder().addrs("127.0.0.1:1").tls(TlsMode.ca(f("missing.crt"))).connect());
    }
}
