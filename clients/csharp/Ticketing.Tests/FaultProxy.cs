using System;
using System.Collections.Generic;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Threading;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// A fault-injecting TCP proxy in front of a real server, for what a real
    /// server cannot be made to do on purpose: it passes every byte both ways,
    /// except that, when armed, it swallows the next G frame from the server
    /// and cuts the connection, so that a grant really happens and its answer
    /// is lost.
    /// </summary>
    internal sealed class FaultProxy : IDisposable
    {
        readonly TcpListener listener;
        readonly string upHost;
        readonly int upPort;
        readonly List<TcpClient> socks = new List<TcpClient>();
        int armed;
        public ulong SwallowedToken;

        public FaultProxy(string upstream)
        {
            Connection.SplitAddr(upstream, out upHost, out upPort);
            listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            Addr = "127.0.0.1:" + ((IPEndPoint)listener.LocalEndpoint).Port;
            new Thread(Accept) { IsBackground = true }.Start();
        }

        public string Addr { get; private set; }

        volatile bool blackHole;
        volatile bool hideSessions;

        /// <summary>Clears ReadySessions in every Y from now on: the client sees a server older than many sessions per connection.</summary>
        public void HideSessions() { hideSessions = true; }

        /// <summary>From now on forward nothing either way, on every connection, old and new, while keeping them open (a network partition the sockets do not see).</summary>
        public void BlackHole() { blackHole = true; }

        /// <summary>Closes every connection through the proxy (both sides see a reset or end of stream); new ones are forwarded.</summary>
        public void CutAll()
        {
            List<TcpClient> all;
            lock (socks) { all = new List<TcpClient>(socks); socks.Clear(); }
            foreach (var s in all) Close(s);
        }

        /// <summary>Swallow the next G from the server and cut that connection.</summary>
        public void SwallowNextGrant() { Interlocked.Exchange(ref armed, 1); }

        void Accept()
        {
            for (;;)
            {
                TcpClient down, up;
                try { down = listener.AcceptTcpClient(); }
                catch (Exception) { return; }
                up = new TcpClient();
                try { up.Connect(upHost, upPort); }
                catch (Exception) { Close(down); continue; }
                down.NoDelay = up.NoDelay = true;
                lock (socks) { socks.Add(down); socks.Add(up); }
                var d = down; var u = up;
                new Thread(() => Upward(d, u)) { IsBackground = true }.Start();
                new Thread(() => Downward(d, u)) { IsBackground = true }.Start();
            }
        }

        void Upward(TcpClient down, TcpClient up)
        {
            var buf = new byte[65536];
            try
            {
                var from = down.GetStream(); var to = up.GetStream();
                int n;
                while ((n = from.Read(buf, 0, buf.Length)) > 0) if (!blackHole) to.Write(buf, 0, n);
            }
            catch (Exception) { }
            Close(down); Close(up);
        }

        void Downward(TcpClient down, TcpClient up)
        {
            try
            {
                var from = up.GetStream(); var to = down.GetStream();
                var head = new byte[4];
                for (;;)
                {
                    var f = Codec.ReadFrame(from, head, true);
                    if (f == null) break;
                    if (f.Type == FrameType.Granted && Interlocked.Exchange(ref armed, 0) == 1)
                    {
                        SwallowedToken = f.Token;
                        break;
                    }
                    if (blackHole) continue;
                    if (hideSessions && f.Type == FrameType.Ready) f.Flags = (byte)(f.Flags & ~Codec.ReadySessions);
                    var b = Codec.Encode(f);
                    to.Write(b, 0, b.Length);
                }
            }
            catch (Exception) { }
            Close(down); Close(up);
        }

        static void Close(TcpClient c)
        {
            try { c.Client.Shutdown(SocketShutdown.Both); } catch (Exception) { }
            try { c.Close(); } catch (Exception) { }
        }

        public void Dispose()
        {
            listener.Stop();
            lock (socks) foreach (var s in socks) Close(s);
        }
    }
}
