using System;
using System.Net;
using NUnit.Framework;

namespace Ticketing.Tests
{
    /// <summary>The client's own server-name check (RFC 6125) and its DER reader.</summary>
    [TestFixture]
    public class ServerNameTests
    {
        static ServerName.Names San(string[] dns, string[] ips, string cn = null)
        {
            var n = new ServerName.Names { HasSan = true, CommonName = cn };
            foreach (var d in dns) n.Dns.Add(d);
            foreach (var ip in ips) n.Ips.Add(IPAddress.Parse(ip).GetAddressBytes());
            return n;
        }

        [Test]
        public void DnsNamesMatchCaseInsensitivelyWithWildcardsOnlyAsTheLeftMostLabel()
        {
            var n = San(new[] { "Node1.Example.com", "*.svc.example.com" }, new string[0]);
            Assert.IsTrue(ServerName.Matches(n, "node1.example.com"));
            Assert.IsTrue(ServerName.Matches(n, "node1.example.com."));
            Assert.IsTrue(ServerName.Matches(n, "a.svc.example.com"));
            Assert.IsFalse(ServerName.Matches(n, "a.b.svc.example.com"), "a wildcard covers one label");
            Assert.IsFalse(ServerName.Matches(n, "svc.example.com"), "a wildcard needs a label");
            Assert.IsFalse(ServerName.Matches(n, "node2.example.com"));
            Assert.IsFalse(ServerName.DnsMatches("*.com", "example.com"), "no wildcard over a public suffix-sized name");
            Assert.IsFalse(ServerName.DnsMatches("f*o.example.com", "foo.example.com"), "partial wildcards are not honoured");
        }

        [Test]
        public void AddressesMatchOnlyIpSans()
        {
            var n = San(new[] { "127.0.0.1", "localhost" }, new[] { "10.0.0.1", "::1" });
            Assert.IsTrue(ServerName.Matches(n, "10.0.0.1"));
            Assert.IsTrue(ServerName.Matches(n, "[::1]"));
            Assert.IsTrue(ServerName.Matches(n, "::1"));
            Assert.IsFalse(ServerName.Matches(n, "127.0.0.1"), "a DNS SAN spelling an address is not an IP SAN");
            var ipOnly = San(new string[0], new[] { "127.0.0.1" });
            Assert.IsFalse(ServerName.Matches(ipOnly, "localhost"), "a name never matches an IP SAN");
        }

        [Test]
        public void CommonNameCountsOnlyWithoutSans()
        {
            Assert.IsFalse(ServerName.Matches(San(new[] { "evil.example" }, new string[0], "127.0.0.1"), "127.0.0.1"));
            var noSan = new ServerName.Names { HasSan = false, CommonName = "node1.example.com" };
            Assert.IsTrue(ServerName.Matches(noSan, "NODE1.example.com"));
            Assert.IsFalse(ServerName.Matches(noSan, "node2.example.com"));
            Assert.IsFalse(ServerName.Matches(new ServerName.Names(), "node1.example.com"));
        }

        [Test]
        public void ReadsSansAndTheCommonName()
        {
            // SEQUENCE { [2] "a.example", [7] 127.0.0.1, [6] "uri" }
            var san = new byte[] { 0x30, 0x14, 0x82, 0x09, (byte)'a', (byte)'.', (byte)'e', (byte)'x', (byte)'a', (byte)'m', (byte)'p', (byte)'l', (byte)'e',
                0x87, 0x04, 127, 0, 0, 1, 0x86, 0x01, (byte)'u' };
            var n = new ServerName.Names();
            ServerName.ReadSan(san, n);
            CollectionAssert.AreEqual(new[] { "a.example" }, n.Dns);
            Assert.AreEqual(1, n.Ips.Count);
            CollectionAssert.AreEqual(new byte[] { 127, 0, 0, 1 }, n.Ips[0]);
            // SEQUENCE { SET { SEQUENCE { OID 2.5.4.3, UTF8String "cn" } } }
            var name = new byte[] { 0x30, 0x0d, 0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x02, (byte)'c', (byte)'n' };
            Assert.AreEqual("cn", ServerName.ReadCommonName(name));
        }

        /// <summary>
        /// The DER reader on random and mutated input: it either reads names
        /// or throws FormatException, never anything else (no index errors,
        /// no hang). The seed is printed so a failure can be replayed.
        /// </summary>
        [Test]
        public void DerReaderFuzz()
        {
            int seed = Environment.TickCount;
            var rnd = new Random(seed);
            var valid = new byte[] { 0x30, 0x14, 0x82, 0x09, (byte)'a', (byte)'.', (byte)'e', (byte)'x', (byte)'a', (byte)'m', (byte)'p', (byte)'l', (byte)'e',
                0x87, 0x04, 127, 0, 0, 1, 0x86, 0x01, (byte)'u' };
            var name = new byte[] { 0x30, 0x0d, 0x31, 0x0b, 0x30, 0x09, 0x06, 0x03, 0x55, 0x04, 0x03, 0x0c, 0x02, (byte)'c', (byte)'n' };
            for (int i = 0; i < 20000; i++)
            {
                byte[] b;
                if (i % 3 == 0)
                {
                    b = new byte[rnd.Next(0, 40)];
                    rnd.NextBytes(b);
                }
                else
                {
                    var src = i % 3 == 1 ? valid : name;
                    b = (byte[])src.Clone();
                    int flips = rnd.Next(1, 4);
                    for (int k = 0; k < flips; k++) b[rnd.Next(b.Length)] = (byte)rnd.Next(256);
                    if (rnd.Next(4) == 0) Array.Resize(ref b, rnd.Next(b.Length));
                }
                try { ServerName.ReadSan(b, new ServerName.Names()); }
                catch (FormatException) { }
                catch (Exception e) { Assert.Fail("seed " + seed + ", input " + BitConverter.ToString(b) + ": ReadSan threw " + e); }
                try { ServerName.ReadCommonName(b); }
                catch (FormatException) { }
                catch (Exception e) { Assert.Fail("seed " + seed + ", input " + BitConverter.ToString(b) + ": ReadCommonName threw " + e); }
            }
        }
    }
}
