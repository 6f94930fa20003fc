using System;
using System.Collections.Generic;
using System.IO;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using NUnit.Framework;
using Ticketing.Wire;

namespace Ticketing.Tests
{
    /// <summary>
    /// A scriptable fake Ticketing server for the behaviour-rule tests: it
    /// listens on 127.0.0.1, runs the script of the n-th accepted connection
    /// (the last one for all later connections) on its own thread, and records
    /// every frame every connection received. It is a test double for what a
    /// real server cannot be made to do on purpose (drop, go silent, send M,
    /// E, garbage, grant after a cancel).
    /// </summary>
    internal sealed class FakeServer : IDisposable
    {
        readonly TcpListener listener;
        readonly List<Action<FakeConn>> scripts;
        readonly List<FakeConn> conns = new List<FakeConn>();
        readonly List<Frame> received = new List<Frame>();
        readonly Thread acceptor;
        volatile bool stopped;
        public readonly List<Exception> ScriptErrors = new List<Exception>();
        public long RawBytes; // bytes a Silent script read

        public FakeServer(params Action<FakeConn>[] scripts)
        {
            this.scripts = new List<Action<FakeConn>>(scripts);
            listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            Addr = "127.0.0.1:" + ((IPEndPoint)listener.LocalEndpoint).Port;
            acceptor = new Thread(Accept) { IsBackground = true, Name = "fake server " + Addr };
            acceptor.Start();
        }

        public string Addr { get; private set; }

        public int Accepted { get { lock (conns) return conns.Count; } }

        public List<Frame> Received { get { lock (received) return new List<Frame>(received); } }

        public int Count(byte type)
        {
            int n = 0;
            foreach (var f in Received) if (f.Type == type) n++;
            return n;
        }

        internal void Record(Frame f) { lock (received) received.Add(f); }

        public FakeConn Conn(int i) { lock (conns) return conns[i]; }

        void Accept()
        {
            while (!stopped)
            {
                TcpClient c;
                try { c = listener.AcceptTcpClient(); }
                catch (Exception) { return; }
                c.NoDelay = true;
                FakeConn fc;
                Action<FakeConn> script;
                lock (conns)
                {
                    fc = new FakeConn(this, c, conns.Count);
                    conns.Add(fc);
                    script = scripts[Math.Min(conns.Count - 1, scripts.Count - 1)];
                }
                var t = new Thread(() =>
                {
                    try { script(fc); }
                    catch (Exception e)
                    {
                        if (!(e is IOException) && !(e is ObjectDisposedException) && !(e is EndOfStreamException) && !stopped)
                            lock (ScriptErrors) ScriptErrors.Add(e);
                    }
                    finally { fc.Close(); }
                }) { IsBackground = true };
                t.Start();
            }
        }

        public void Dispose()
        {
            stopped = true;
            listener.Stop();
            lock (conns) foreach (var c in conns) c.Close();
        }

        // ---------------- ready-made scripts ----------------

        /// <summary>Hello, Ready, then a working lock service on table.</summary>
        public static Action<FakeConn> Normal(LockTable table, uint intervalMs = 5000, uint count = 1024)
        {
            return c =>
            {
                c.Hello();
                c.Ready(intervalMs, count);
                c.Serve(table);
            };
        }
    }

    /// <summary>A fake server's lock state, shared by its connections.</summary>
    internal sealed class LockTable
    {
        public readonly Dictionary<string, ulong> Held = new Dictionary<string, ulong>();
        public readonly Dictionary<string, string> Owners = new Dictionary<string, string>(); // key -> owner hex
        public ulong Last;
        public uint LeaseMs = 30000;

        public Frame Answer(Frame f)
        {
            lock (this)
            {
                var key = Encoding.UTF8.GetString(f.Key);
                switch (f.Type)
                {
                    case FrameType.Acquire:
                        if (Held.ContainsKey(key)) return new Frame { Type = FrameType.NotAcquired, Id = f.Id };
                        Held[key] = ++Last;
                        Owners[key] = VectorTests.ToHex(f.Owner);
                        return new Frame { Type = FrameType.Granted, Id = f.Id, Token = Last, LeaseMs = (uint)f.Lease * 1000 };
                    case FrameType.Release:
                        ulong t;
                        if (Held.TryGetValue(key, out t) && t == f.Token)
                        {
                            Held.Remove(key);
                            return new Frame { Type = FrameType.Released, Id = f.Id };
                        }
                        return new Frame { Type = FrameType.NotHeld, Id = f.Id };
                    case FrameType.ReleaseOwner:
                        string o;
                        if (Owners.TryGetValue(key, out o) && o == VectorTests.ToHex(f.Owner))
                        {
                            Held.Remove(key);
                            Owners.Remove(key);
                            return new Frame { Type = FrameType.Released, Id = f.Id };
                        }
                        return new Frame { Type = FrameType.NotHeld, Id = f.Id };
                    case FrameType.Describe:
                        {
                            ulong tok;
                            bool held = Held.TryGetValue(key, out tok);
                            return new Frame { Type = FrameType.Info, Id = f.Id, Flags = (byte)(held ? 1 : 0), Token = tok, LeaseMs = held ? LeaseMs : 0, RemainingMs = held ? LeaseMs : 0 };
                        }
                }
                return null;
            }
        }
    }

    /// <summary>One accepted connection of the fake server.</summary>
    internal sealed class FakeConn
    {
        readonly FakeServer srv;
        readonly TcpClient tcp;
        readonly Stream s;
        readonly byte[] head = new byte[4];
        readonly object wmu = new object();
        public readonly int Index;

        public FakeConn(FakeServer srv, TcpClient tcp, int index)
        {
            this.srv = srv; this.tcp = tcp; Index = index;
            s = tcp.GetStream();
        }

        /// <summary>The next frame from the client (recorded); throws at EOF or after timeout.</summary>
        public Frame Recv(int timeoutMs = 20000)
        {
            tcp.ReceiveTimeout = timeoutMs;
            var f = Codec.ReadFrame(s, head);
            if (f == null) throw new EndOfStreamException("the client closed the connection");
            srv.Record(f);
            return f;
        }

        /// <summary>The next frame that is not a ping or pong (pings are answered).</summary>
        public Frame Next(int timeoutMs = 20000)
        {
            for (;;)
            {
                var f = Recv(timeoutMs);
                if (f.Type == FrameType.Ping) { Send(new Frame { Type = FrameType.Pong, Nonce = f.Nonce }); continue; }
                if (f.Type == FrameType.Pong) continue;
                return f;
            }
        }

        /// <summary>Waits for the next request of the given type.</summary>
        public Frame Expect(byte type, int timeoutMs = 20000)
        {
            var f = Next(timeoutMs);
            if (f.Type != type) throw new InvalidDataException("expected " + FrameType.Name(type) + ", got " + FrameType.Name(f.Type));
            return f;
        }

        /// <summary>True when the client closed the connection (EOF) within the timeout.</summary>
        public bool ClosedByClient(int timeoutMs = 20000)
        {
            try
            {
                for (;;) Recv(timeoutMs);
            }
            catch (EndOfStreamException) { return true; }
            catch (IOException e) { return !(e.InnerException is SocketException && ((SocketException)e.InnerException).SocketErrorCode == SocketError.TimedOut); }
            catch (ObjectDisposedException) { return true; }
        }

        /// <summary>Reads and discards whatever the client sends (a TLS hello, frames) without ever answering, until it goes away.</summary>
        public void Silent()
        {
            tcp.ReceiveTimeout = 120000;
            var buf = new byte[4096];
            int n;
            try { while ((n = s.Read(buf, 0, buf.Length)) > 0) Interlocked.Add(ref srv.RawBytes, n); }
            catch (IOException) { }
            catch (ObjectDisposedException) { }
        }

        public Frame Hello() { return Expect(FrameType.Hello); }

        public void Ready(uint intervalMs = 5000, uint count = 1024, bool leader = true, string node = "fake")
        {
            Send(new Frame { Type = FrameType.Ready, Version = 1, Flags = (byte)(leader ? 1 : 0), IntervalMs = intervalMs, Count = count, Text = Encoding.UTF8.GetBytes(node) });
        }

        public void Send(Frame f) { SendRaw(Codec.Encode(f)); }

        public void SendRaw(byte[] b)
        {
            lock (wmu)
            {
                s.Write(b, 0, b.Length);
                s.Flush();
            }
        }

        public void SendError(ErrorCode code, string msg)
        {
            Send(new Frame { Type = FrameType.Error, Code = (ushort)code, Text = Encoding.UTF8.GetBytes(msg) });
        }

        /// <summary>Answers requests from table until the client goes away.</summary>
        public void Serve(LockTable table)
        {
            for (;;)
            {
                var f = Next(120000);
                var a = table.Answer(f);
                if (a != null) Send(a);
            }
        }

        public void Close()
        {
            try { tcp.Client.Shutdown(SocketShutdown.Both); } catch (Exception) { }
            try { tcp.Close(); } catch (Exception) { }
        }
    }
}
