using System;
using System.Collections.Generic;
using System.Net;
using System.Security.Cryptography.X509Certificates;
using System.Text;

namespace Ticketing
{
    /// <summary>
    /// The server identity check of RFC 6125, done by the client itself rather
    /// than trusted to the runtime (Mono, for one, does not report a name
    /// mismatch when the chain has errors too, and a CA file always gives it
    /// chain errors). A host that is an IP address matches only the
    /// certificate's IP address SANs; a DNS name matches only its DNS SANs
    /// (case-insensitive, a wildcard only as the whole left-most label); the
    /// subject CN is consulted only when the certificate has no SAN at all.
    /// </summary>
    internal static class ServerName
    {
        /// <summary>The names a certificate is issued for.</summary>
        internal sealed class Names
        {
            internal readonly List<string> Dns = new List<string>();
            internal readonly List<byte[]> Ips = new List<byte[]>();
            internal bool HasSan;
            internal string CommonName;
        }

        /// <summary>Why cert is not valid for host, or null when it is.</summary>
        internal static string Mismatch(X509Certificate2 cert, string host)
        {
            Names n;
            try { n = Read(cert); }
            catch (FormatException e) { return "its names cannot be read (" + e.Message + ")"; }
            if (Matches(n, host)) return null;
            return "it is issued for " + Describe(n) + ", not for " + host;
        }

        internal static string Describe(Names n)
        {
            var all = new List<string>();
            foreach (var d in n.Dns) all.Add("DNS:" + d);
            foreach (var ip in n.Ips) all.Add("IP:" + (ip.Length == 4 || ip.Length == 16 ? new IPAddress(ip).ToString() : BitConverter.ToString(ip)));
            if (!n.HasSan) return n.CommonName != null ? "CN " + n.CommonName + " (no subject alternative names)" : "no name at all";
            return all.Count > 0 ? string.Join(", ", all) : "no DNS or IP name";
        }

        internal static bool Matches(Names n, string host)
        {
            if (string.IsNullOrEmpty(host)) return false;
            if (host.StartsWith("[", StringComparison.Ordinal) && host.EndsWith("]", StringComparison.Ordinal)) host = host.Substring(1, host.Length - 2);
            IPAddress ip;
            bool isIp = IPAddress.TryParse(host, out ip) && (host.IndexOf(':') >= 0 || IsDottedQuad(host));
            if (n.HasSan)
            {
                if (isIp)
                {
                    var want = ip.GetAddressBytes();
                    foreach (var have in n.Ips)
                        if (SameBytes(have, want)) return true;
                    return false;
                }
                foreach (var d in n.Dns)
                    if (DnsMatches(d, host)) return true;
                return false;
            }
            // No SAN extension: the CN, as the last resort RFC 6125 allows.
            if (n.CommonName == null) return false;
            if (isIp)
            {
                IPAddress cn;
                return IPAddress.TryParse(n.CommonName, out cn) && SameBytes(cn.GetAddressBytes(), ip.GetAddressBytes());
            }
            return DnsMatches(n.CommonName, host);
        }

        // IPAddress.TryParse also takes "1", "1.2" and "0x7f.1": only four
        // decimal parts are an address here, anything else is a name.
        static bool IsDottedQuad(string s)
        {
            var parts = s.Split('.');
            if (parts.Length != 4) return false;
            foreach (var p in parts)
            {
                if (p.Length == 0 || p.Length > 3) return false;
                foreach (var c in p) if (c < '0' || c > '9') return false;
            }
            return true;
        }

        static bool SameBytes(byte[] a, byte[] b)
        {
            if (a.Length != b.Length) return false;
            for (int i = 0; i < a.Length; i++) if (a[i] != b[i]) return false;
            return true;
        }

        /// <summary>A DNS-ID against the reference host: ASCII case-insensitive, trailing dots ignored, "*." only as the whole left-most label of a name with at least two more labels.</summary>
        internal static bool DnsMatches(string pattern, string host)
        {
            pattern = pattern.TrimEnd('.');
            host = host.TrimEnd('.');
            if (pattern.Length == 0 || host.Length == 0) return false;
            if (pattern.StartsWith("*.", StringComparison.Ordinal))
            {
                var rest = pattern.Substring(1); // ".example.com"
                if (rest.IndexOf('*') >= 0 || rest.Split('.').Length < 3) return false;
                int dot = host.IndexOf('.');
                if (dot <= 0) return false;
                return string.Equals(host.Substring(dot), rest, StringComparison.OrdinalIgnoreCase);
            }
            if (pattern.IndexOf('*') >= 0) return false; // partial wildcards are not honoured
            return string.Equals(pattern, host, StringComparison.OrdinalIgnoreCase);
        }

        const string SanOid = "2.5.29.17";

        /// <summary>The DNS and IP SANs and the subject CN of cert. Throws FormatException for malformed DER.</summary>
        internal static Names Read(X509Certificate2 cert)
        {
            var n = new Names();
            foreach (X509Extension ext in cert.Extensions)
            {
                if (ext.Oid == null || ext.Oid.Value != SanOid) continue;
                n.HasSan = true;
                ReadSan(ext.RawData, n);
            }
            n.CommonName = ReadCommonName(cert.SubjectName.RawData);
            return n;
        }

        /// <summary>GeneralNames ::= SEQUENCE OF GeneralName; dNSName is [2] IA5String, iPAddress [7] OCTET STRING.</summary>
        internal static void ReadSan(byte[] der, Names n)
        {
            var outer = new Der(der, 0, der.Length);
            int tag, start, len;
            outer.Next(out tag, out start, out len);
            if (tag != 0x30) throw new FormatException("the subject alternative names are not a SEQUENCE");
            if (!outer.AtEnd) throw new FormatException("trailing bytes after the subject alternative names");
            var names = new Der(der, start, len);
            while (!names.AtEnd)
            {
                names.Next(out tag, out start, out len);
                if (tag == 0x82) n.Dns.Add(Encoding.ASCII.GetString(der, start, len));
                else if (tag == 0x87) { var ip = new byte[len]; Buffer.BlockCopy(der, start, ip, 0, len); n.Ips.Add(ip); }
            }
        }

        /// <summary>The last CN of a Name (SEQUENCE OF SET OF SEQUENCE { OID, value }), or null.</summary>
        internal static string ReadCommonName(byte[] der)
        {
            string cn = null;
            var outer = new Der(der, 0, der.Length);
            int tag, start, len;
            outer.Next(out tag, out start, out len);
            if (tag != 0x30) throw new FormatException("the subject is not a SEQUENCE");
            var rdns = new Der(der, start, len);
            while (!rdns.AtEnd)
            {
                rdns.Next(out tag, out start, out len);
                if (tag != 0x31) throw new FormatException("a subject component is not a SET");
                var set = new Der(der, start, len);
                while (!set.AtEnd)
                {
                    set.Next(out tag, out start, out len);
                    if (tag != 0x30) throw new FormatException("a subject attribute is not a SEQUENCE");
                    var atv = new Der(der, start, len);
                    int otag, ostart, olen, vtag, vstart, vlen;
                    atv.Next(out otag, out ostart, out olen);
                    atv.Next(out vtag, out vstart, out vlen);
                    // 2.5.4.3 (id-at-commonName) is 55 04 03.
                    if (otag == 0x06 && olen == 3 && der[ostart] == 0x55 && der[ostart + 1] == 0x04 && der[ostart + 2] == 0x03)
                    {
                        switch (vtag)
                        {
                            case 0x0c: cn = Encoding.UTF8.GetString(der, vstart, vlen); break;               // UTF8String
                            case 0x13: case 0x16: case 0x14: cn = Encoding.ASCII.GetString(der, vstart, vlen); break; // Printable, IA5, T61
                            case 0x1e: cn = Encoding.BigEndianUnicode.GetString(der, vstart, vlen); break;   // BMPString
                        }
                    }
                }
            }
            return cn;
        }

        /// <summary>A reader of DER tag-length-value items within [pos, end).</summary>
        internal struct Der
        {
            readonly byte[] b;
            int pos;
            readonly int end;

            internal Der(byte[] b, int start, int len)
            {
                if (b == null || start < 0 || len < 0 || start > b.Length - len) throw new FormatException("DER item outside its buffer");
                this.b = b; pos = start; end = start + len;
            }

            internal bool AtEnd { get { return pos >= end; } }

            /// <summary>The next item: its tag byte, where its content starts and how long it is.</summary>
            internal void Next(out int tag, out int start, out int len)
            {
                if (end - pos < 2) throw new FormatException("truncated DER item");
                tag = b[pos++];
                if ((tag & 0x1f) == 0x1f) throw new FormatException("multi-byte DER tags are not used in names");
                int first = b[pos++];
                if (first < 0x80) len = first;
                else
                {
                    int k = first & 0x7f;
                    if (k == 0 || k > 3 || end - pos < k) throw new FormatException("bad DER length");
                    len = 0;
                    for (int i = 0; i < k; i++) len = (len << 8) | b[pos++];
                }
                if (len > end - pos) throw new FormatException("DER item longer than its container");
                start = pos;
                pos += len;
            }
        }
    }
}
