using System;
using System.Text;
using Ticketing.Wire;

namespace Ticketing
{
    /// <summary>
    /// The cluster a broker serves: set by the builder's ClusterId, or by the
    /// first server that reports a cluster ID in its hello answer, never
    /// changed afterwards. A server of another cluster (a wiped server that
    /// founded a cluster of its own, a cluster restored elsewhere) would grant
    /// keys the real cluster holds, with tokens that start again from 1; it is
    /// refused.
    /// </summary>
    internal sealed class ClusterPin
    {
        readonly object mu = new object();
        readonly bool configured;
        byte[] id; // null until pinned

        internal ClusterPin(byte[] configured)
        {
            this.configured = configured != null;
            id = configured;
        }

        /// <summary>Parses a cluster ID given by the application: 32 hex digits, not all zero; null when it is not one.</summary>
        internal static byte[] Parse(string s)
        {
            s = s.Trim();
            if (s.Length != 2 * Codec.ClusterIdLen) return null;
            var b = new byte[Codec.ClusterIdLen];
            bool zero = true;
            for (int i = 0; i < b.Length; i++)
            {
                int hi = Nibble(s[2 * i]), lo = Nibble(s[2 * i + 1]);
                if (hi < 0 || lo < 0) return null;
                b[i] = (byte)(hi << 4 | lo);
                zero &= b[i] == 0;
            }
            return zero ? null : b;
        }

        static int Nibble(char c)
        {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        }

        internal static string Format(byte[] id)
        {
            var sb = new StringBuilder(2 * id.Length);
            bool zero = true;
            foreach (var x in id)
            {
                sb.Append(x.ToString("x2"));
                zero &= x == 0;
            }
            return zero ? "none" : sb.ToString();
        }

        /// <summary>The pinned ID in hex, or null while none is pinned.</summary>
        internal string Get()
        {
            lock (mu) return id == null ? null : Format(id);
        }

        /// <summary>
        /// Admits or refuses the server at addr by its hello answer: null to
        /// admit, else the refusal. The first ID reported is pinned; a server
        /// reporting no ID yet is admitted without pinning while nothing is
        /// pinned (a serving leader always has its ID) and refused once an ID is
        /// pinned; a server that reports none at all (older than cluster IDs) is
        /// admitted unchecked, so that clients keep working through a rolling
        /// upgrade.
        /// </summary>
        internal WrongClusterException Check(string addr, Frame ready)
        {
            if ((ready.Flags & Codec.ReadyClusterId) == 0) return null;
            string server = Format(ready.ClusterId);
            string pinned;
            lock (mu)
            {
                if (id == null)
                {
                    if (server != "none") id = (byte[])ready.ClusterId.Clone();
                    return null;
                }
                pinned = Format(id);
            }
            if (pinned == server) return null;
            string what = server == "none" ? "has no cluster ID yet (cluster none: still forming)" : "belongs to cluster " + server;
            return new WrongClusterException("the server " + addr + " (node " + Encoding.UTF8.GetString(ready.Text) + ") " + what +
                ", and this client is pinned to cluster " + pinned + (configured ? " (set by the builder's ClusterId)" : " (pinned at the first server it reached)") +
                ": it does not use that server. If the cluster was restored from a snapshot, it has a new ID: give the clients the new one (ClusterId) " +
                "or restart them; otherwise remove the address from the client's list", pinned, server) { Address = addr };
        }
    }
}
