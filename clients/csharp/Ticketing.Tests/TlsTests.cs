using System;
using System.Diagnostics;
using System.IO;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>
    /// The four TLS modes and mutual TLS against real ticketd processes, with
    /// certificates made by the openssl command for each run.
    /// </summary>
    [TestFixture]
    public class TlsTests
    {
        static readonly TimeSpan S = U.S;
        static string dir;

        /// <summary>A test CA, a server certificate for 127.0.0.1 signed by it, a client certificate (PEM and PKCS#12) and an unrelated CA.</summary>
        static string Certs()
        {
            lock (typeof(TlsTests))
            {
                if (dir != null) return dir;
                var d = Path.Combine(Path.GetTempPath(), "ticketing-cs-tls-" + Guid.NewGuid().ToString("N").Substring(0, 8));
                Directory.CreateDirectory(d);
                File.WriteAllText(Path.Combine(d, "server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
                File.WriteAllText(Path.Combine(d, "client.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n");
                Ssl(d, "req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=ticketing-test-ca");
                Ssl(d, "req -x509 -newkey rsa:2048 -nodes -keyout other.key -out other-ca.crt -days 2 -subj /CN=unrelated-ca");
                foreach (var who in new[] { "server", "client" })
                {
                    Ssl(d, "req -newkey rsa:2048 -nodes -keyout " + who + ".key -out " + who + ".csr -subj /CN=" + (who == "server" ? "127.0.0.1" : "ticketing-client"));
                    Ssl(d, "x509 -req -in " + who + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -out " + who + ".crt -days 2 -extfile " + who + ".ext");
                }
                // Right CA, wrong names: one for another host, one for the IP only.
                File.WriteAllText(Path.Combine(d, "evil.ext"), "subjectAltName=DNS:evil.example\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
                File.WriteAllText(Path.Combine(d, "iponly.ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n");
                foreach (var who in new[] { "evil", "iponly" })
                {
                    // The CN names the address too: with SANs present it must not count.
                    Ssl(d, "req -newkey rsa:2048 -nodes -keyout " + who + ".key -out " + who + ".csr -subj /CN=" + (who == "evil" ? "127.0.0.1" : "localhost"));
                    Ssl(d, "x509 -req -in " + who + ".csr -CA ca.crt -CAkey ca.key -CAcreateserial -out " + who + ".crt -days 2 -extfile " + who + ".ext");
                }
                // 3DES/SHA-1 protection: readable by Mono's and .NET's PKCS#12 readers alike.
                Ssl(d, "pkcs12 -export -out client.p12 -inkey client.key -in client.crt -passout pass:test -keypbe PBE-SHA1-3DES -certpbe PBE-SHA1-3DES -macalg sha1");
                dir = d;
                return d;
            }
        }

        static void Ssl(string d, string args)
        {
            var psi = new ProcessStartInfo("openssl", args)
            { UseShellExecute = false, WorkingDirectory = d, RedirectStandardError = true, RedirectStandardOutput = true };
            Process p;
            try { p = Process.Start(psi); }
            catch (Exception e)
            {
                Assert.Fail("the openssl command is needed to make test certificates (apt-get install -y openssl): " + e.Message);
                return;
            }
            var err = p.StandardError.ReadToEndAsync();
            p.StandardOutput.ReadToEnd();
            p.WaitForExit();
            if (p.ExitCode != 0) Assert.Fail("openssl " + args + " failed: " + err.Result);
        }

        static string F(string name) { return Path.Combine(Certs(), name); }

        static TicketBroker Tls(Cluster c, TlsMode m) { return U.Builder(c.AddrList).Tls(m).Connect(); }

        static void Works(TicketBroker b)
        {
            U.Ready(b);
            var t = U.Get(b.AcquireAsync("tls", S, S, TimeSpan.Zero));
            U.Wait(t.ReleaseAsync());
        }

        [Test]
        public void TlsModesAgainstATlsServer()
        {
            using (var c = new Cluster(1, "--tls-cert", F("server.crt"), "--tls-key", F("server.key")))
            {
                using (var b = Tls(c, TlsMode.Ca(F("ca.crt")))) Works(b);
                using (var b = Tls(c, TlsMode.InsecureSkipVerify)) Works(b);
                using (var b = Tls(c, TlsMode.Ca(F("other-ca.crt"))))
                {
                    var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                    StringAssert.Contains("certificate", e.Message);
                }
                using (var b = Tls(c, TlsMode.SystemRoots))
                {
                    var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                    StringAssert.Contains("certificate", e.Message);
                }
                using (var b = Tls(c, TlsMode.Off))
                {
                    var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                    StringAssert.Contains("TLS", e.Message);
                }
            }
        }

        static TicketBroker Named(Cluster c, string host, TlsMode m)
        {
            return U.Builder(c.Addrs[0].Replace("127.0.0.1", host)).Tls(m).Connect();
        }

        [Test]
        public void CaModeRefusesACertificateForAnotherHost()
        {
            using (var c = new Cluster(1, "--tls-cert", F("evil.crt"), "--tls-key", F("evil.key")))
            {
                using (var b = Tls(c, TlsMode.Ca(F("ca.crt"))))
                {
                    var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                    StringAssert.Contains("does not match the address 127.0.0.1", e.Message);
                    StringAssert.Contains("DNS:evil.example", e.Message);
                }
                // The same server is reachable at all: only its name is wrong.
                using (var b = Tls(c, TlsMode.InsecureSkipVerify)) Works(b);
            }
        }

        [Test]
        public void CaModeRefusesAnIpOnlyCertificateReachedByName()
        {
            using (var c = new Cluster(1, "--tls-cert", F("iponly.crt"), "--tls-key", F("iponly.key")))
            {
                using (var b = Named(c, "localhost", TlsMode.Ca(F("ca.crt"))))
                {
                    var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                    StringAssert.Contains("does not match the address localhost", e.Message);
                }
                using (var b = Named(c, "127.0.0.1", TlsMode.Ca(F("ca.crt")))) Works(b);
            }
        }

        [Test]
        public void CaModeAcceptsTheDnsNameOfACertificate()
        {
            using (var c = new Cluster(1, "--tls-cert", F("server.crt"), "--tls-key", F("server.key")))
            using (var b = Named(c, "localhost", TlsMode.Ca(F("ca.crt"))))
                Works(b);
        }

        [Test]
        public void TlsClientAgainstAPlainServer()
        {
            using (var c = new Cluster(1))
            using (var b = Tls(c, TlsMode.InsecureSkipVerify))
            {
                var e = U.Throws<UnavailableException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                StringAssert.Contains("does not use TLS", e.Message);
            }
        }

        [Test]
        public void MutualTls()
        {
            using (var c = new Cluster(1, "--tls-cert", F("server.crt"), "--tls-key", F("server.key"), "--tls-client-ca", F("ca.crt")))
            {
                using (var b = Tls(c, TlsMode.Ca(F("ca.crt")).WithClientCert(F("client.p12"), "test"))) Works(b);
                using (var b = Tls(c, TlsMode.Ca(F("ca.crt"))))
                {
                    var e = U.Throws<UnauthenticatedException>(() => b.WaitReadyAsync(TimeSpan.FromMinutes(1)));
                    StringAssert.Contains("client certificate", e.Message);
                }
            }
        }
    }
}
