using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing
{
    /// <summary>Why a connection ended.</summary>
    internal enum FailKind { Drop, Silent, NotLeader, ServerError, Protocol, Closed }

    /// <summary>Why a connection ended; every request pending on it gets it.</summary>
    internal sealed class ConnFailure
    {
        internal FailKind Kind;
        internal string Addr;
        internal string Hint = ""; // M: the leader's address, if the server knew it
        internal Exception Cause;
        internal TimeSpan Quiet;

        internal bool Closed { get { return Kind == FailKind.Closed; } }

        internal string What()
        {
            switch (Kind)
            {
                case FailKind.Silent:
                    return "the server " + Addr + " sent nothing for " + Quiet.TotalMilliseconds + " ms (3 ping intervals) and the connection was given up";
                case FailKind.NotLeader:
                    return Hint.Length > 0
                        ? "the server " + Addr + " stopped being the leader (new leader " + Hint + ") and ended the session"
                        : "the server " + Addr + " stopped being the leader and ended the session";
                case FailKind.ServerError:
                    return Cause != null ? Cause.Message : "the server " + Addr + " ended the session with an error";
                case FailKind.Protocol:
                    return "the server " + Addr + " sent an invalid frame (" + (Cause != null ? Cause.Message : "?") + ") and the connection was closed";
                case FailKind.Closed:
                    return "the broker was closed";
            }
            return "the connection to " + Addr + " was lost" + (Cause != null ? " (" + Cause.Message + ")" : "");
        }

        internal ErrorCode? Code
        {
            get { var se = Cause as ServerErrorException; return se != null ? se.Code : (ErrorCode?)null; }
        }
    }

    /// <summary>A final answer frame, or the failure that ended the connection.</summary>
    internal sealed class Answer
    {
        internal Frame F;
        internal ConnFailure Fail;
    }

    /// <summary>One request waiting for its final answer.</summary>
    internal sealed class Call
    {
        internal byte Type;
        internal uint Id;
        internal byte[] Owner;
        internal string Key;
        internal long Sent; // Stopwatch ticks just before its bytes were handed to the writer
        internal long Span; // acquire: Stopwatch ticks of wait + 2 × lease, the longest a grant of it can matter
        internal bool Abandoned; // the caller left; a late G is released (acquire)
        internal bool Queued;    // a Q was seen
        internal readonly TaskCompletionSource<Answer> Res =
            new TaskCompletionSource<Answer>(TaskCreationOptions.RunContinuationsAsynchronously);

        internal Call(byte type, string key) { Type = type; Key = key; }
    }

    internal interface IConnHooks
    {
        /// <summary>A G answered an acquire whose caller left: release that exact token.</summary>
        void LateGrant(string key, ulong token);

        /// <summary>
        /// The connection of an acquire ended before its final answer: ask the
        /// leader, on a later connection, to end whatever owner holds or waits
        /// for on key (U), until the Stopwatch time until.
        /// </summary>
        void Orphaned(string key, byte[] owner, long until);
    }

    /// <summary>A failed handshake; Rejected marks refusals that will not go away by themselves.</summary>
    internal sealed class HelloException : Exception
    {
        internal readonly Exception Err; // what callers see (wrapped)
        internal readonly string Hint;
        internal readonly bool Rejected;
        internal HelloException(Exception err, string hint, bool rejected) : base(err.Message, err)
        {
            Err = err; Hint = hint ?? ""; Rejected = rejected;
        }
    }

    internal enum StartResult { Started, Gone }

    /// <summary>
    /// One established session: a reader thread, a writer thread that
    /// coalesces every queued frame into one write, a watchdog for silence,
    /// and the table of pending requests.
    /// </summary>
    internal sealed class Connection
    {
        internal readonly string Addr;
        internal string NodeId;
        internal bool Leader;
        internal uint MaxIn;           // 0 = no limit
        internal TimeSpan Interval;    // the server's ping interval; zero = it sends none
        internal TimeSpan Silence;     // silence after which the connection is dead
        internal readonly long Born = Stopwatch.GetTimestamp();

        readonly TcpClient tcp;
        readonly Stream stream;
        readonly IConnHooks hooks;
        // In-flight slots, null = no limit. Acquires and the other requests
        // (L, U, D) count against separate pools of the Y count each, as the
        // server counts them, so waiting acquires never take the slots a
        // release needs.
        readonly SemaphoreSlim semAcquire;
        readonly SemaphoreSlim semOther;
        internal readonly CancellationTokenSource DeadCts = new CancellationTokenSource();
        internal readonly TaskCompletionSource<bool> Done = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);

        readonly object mu = new object();
        Writer wbuf = new Writer();
        Writer spare = new Writer();
        Dictionary<uint, Call> pending = new Dictionary<uint, Call>();
        uint nextId;
        ConnFailure failure;
        long lastRecv = Stopwatch.GetTimestamp();
        Timer watchdog;
        TimeSpan ownPing; // nonzero when the client pings (server interval 0)
        long pingNonce;

        internal int SlotWaiters; // tests: callers waiting for an in-flight slot
        TaskCompletionSource<bool> acquiresSettled; // set by CancelAcquiresForClose

        Connection(string addr, TcpClient tcp, Stream stream, IConnHooks hooks, uint maxIn)
        {
            Addr = addr; this.tcp = tcp; this.stream = stream; this.hooks = hooks; MaxIn = maxIn;
            if (maxIn > 0)
            {
                semAcquire = new SemaphoreSlim((int)Math.Min(maxIn, 1u << 24));
                semOther = new SemaphoreSlim((int)Math.Min(maxIn, 1u << 24));
            }
        }

        // ---------------- dialing ----------------

        internal static void SplitAddr(string addr, out string host, out int port)
        {
            int i = addr.LastIndexOf(':');
            host = i > 0 ? addr.Substring(0, i) : "";
            if (host.StartsWith("[") && host.EndsWith("]")) host = host.Substring(1, host.Length - 2);
            if (i <= 0 || host.Length == 0 || !int.TryParse(addr.Substring(i + 1), out port) || port < 1 || port > 65535)
                throw new ArgumentException("ticketing: address \"" + addr + "\" is not host:port", "addresses");
        }

        /// <summary>Connects to addr, runs TLS and the hello, and starts the connection's threads.</summary>
        internal static async Task<Connection> DialAsync(string addr, Config cfg, byte flags, IConnHooks hooks, CancellationToken ct)
        {
            string host; int port;
            SplitAddr(addr, out host, out port);
            var tcp = new TcpClient();
            tcp.NoDelay = true;
            try
            {
                using (var tcs = CancellationTokenSource.CreateLinkedTokenSource(ct))
                {
                    var connect = tcp.ConnectAsync(host, port);
                    var done = await Task.WhenAny(connect, Task.Delay(cfg.DialTimeout, tcs.Token)).ConfigureAwait(false);
                    tcs.Cancel();
                    if (done != connect)
                    {
                        tcp.Close();
                        Observe(connect);
                        ct.ThrowIfCancellationRequested();
                        throw new HelloException(new TicketingException("cannot connect to " + addr + ": no answer within " + cfg.DialTimeout.TotalMilliseconds + " ms"), null, false);
                    }
                    await connect.ConfigureAwait(false);
                }
            }
            catch (OperationCanceledException) { tcp.Close(); throw; }
            catch (HelloException) { throw; }
            catch (Exception e)
            {
                tcp.Close();
                throw new HelloException(new TicketingException("cannot connect to " + addr + ": " + e.Message, e), null, false);
            }
            // The rest is blocking I/O bounded by socket timeouts and by
            // shutting the socket down when ct ends: a bare Close does not wake
            // a read blocked in the TLS handshake or the hello on every runtime
            // (Mono's), Shutdown does.
            using (ct.Register(() => Abort(tcp)))
            {
                try
                {
                    return await Task.Run(() => Handshake(addr, host, port, tcp, cfg, flags, hooks, ct)).ConfigureAwait(false);
                }
                catch (Exception)
                {
                    tcp.Close();
                    ct.ThrowIfCancellationRequested();
                    throw;
                }
            }
        }

        /// <summary>Ends a socket so that a read or write blocked on it returns at once.</summary>
        static void Abort(TcpClient tcp)
        {
            try { tcp.Client.Shutdown(SocketShutdown.Both); } catch (Exception) { }
            try { tcp.Close(); } catch (Exception) { }
        }

        static void Observe(Task t) { t.ContinueWith(x => { var _ = x.Exception; }, TaskContinuationOptions.OnlyOnFaulted); }

        static Connection Handshake(string addr, string host, int port, TcpClient tcp, Config cfg, byte flags, IConnHooks hooks, CancellationToken ct)
        {
            int ms = (int)Math.Max(1, cfg.DialTimeout.TotalMilliseconds);
            tcp.ReceiveTimeout = ms;
            tcp.SendTimeout = ms;
            var rec = new RecordingStream(tcp.GetStream());
            Stream s = rec;
            bool certRequested = false;
            if (cfg.Tls != null)
            {
                string why = null;
                var tls = cfg.Tls;
                var ssl = new SslStream(rec, false,
                    (sender, cert, chain, errors) => tls.Validate(host, cert, chain, errors, out why),
                    (sender, target, local, remote, issuers) =>
                    {
                        certRequested = true;
                        return tls.Client;
                    });
                var certs = new X509CertificateCollection();
                if (tls.Client != null) certs.Add(tls.Client);
                try
                {
                    // None: the operating system picks the version (TLS 1.3 where it has it).
                    ssl.AuthenticateAsClient(host, certs, SslProtocols.None, false);
                }
                catch (Exception e)
                {
                    ssl.Dispose();
                    throw TlsFailure(addr, e, why, certRequested, tls, rec);
                }
                s = ssl;
            }
            var hello = new Frame { Type = FrameType.Hello, Version = Codec.Version, Flags = flags, Text = cfg.Token };
            Frame first;
            try
            {
                var hb = Codec.Encode(hello);
                s.Write(hb, 0, hb.Length);
                s.Flush();
                first = Codec.ReadFrame(s, new byte[4]);
                if (first == null) throw new EndOfStreamException("closed by the server");
            }
            catch (WireException e)
            {
                s.Dispose();
                byte[] head = rec.First();
                if (cfg.Tls == null && head.Length > 0 && (head[0] == 0x15 || head[0] == 0x16))
                    throw new HelloException(new TicketingException("the server " + addr + " answered with TLS: it requires TLS, and this broker is configured without it (TlsMode.Off)"), null, true);
                throw new HelloException(new TicketingException("the server " + addr + " answered the hello with an invalid frame (" + e.Message + "); is it a Ticketing server?", e), null, true);
            }
            catch (Exception e)
            {
                s.Dispose();
                if (cfg.Tls != null && certRequested)
                    throw new HelloException(new UnauthenticatedException("the server " + addr + " closed the TLS session after asking for a client certificate: it refused " +
                        (cfg.Tls.Client != null ? "the client certificate" : "the connection without one (configure TlsMode.WithClientCert)"), e), null, true);
                if (cfg.Tls == null && rec.Total == 0)
                {
                    // A TLS server closes a plain connection without a word:
                    // check with a TLS handshake on a second connection.
                    ct.ThrowIfCancellationRequested(); // the broker is closing: no probe
                    if (AnswersTls(host, port, cfg.DialTimeout, ct))
                        throw new HelloException(new TicketingException("the server " + addr + " requires TLS (it closed the plain connection and answers a TLS handshake); this broker is configured without TLS (TlsMode.Off)", e), null, true);
                    throw new HelloException(new TicketingException("the server " + addr + " closed the connection without answering the hello (" + e.Message + ")", e), null, false);
                }
                throw new HelloException(new TicketingException("no answer to the hello from " + addr + ": " + e.Message, e), null, false);
            }
            switch (first.Type)
            {
                case FrameType.Ready:
                    break;
                case FrameType.NotLeader:
                    {
                        s.Dispose();
                        var hint = Encoding.UTF8.GetString(first.Text);
                        throw new HelloException(new NotLeaderException(addr, hint), hint, false);
                    }
                case FrameType.Error:
                    {
                        s.Dispose();
                        var se = new ServerErrorException(addr, (ErrorCode)first.Code, Encoding.UTF8.GetString(first.Text));
                        if (se.Code == ErrorCode.Unauthenticated)
                            throw new HelloException(new UnauthenticatedException("the server " + addr + " refused the client token (E code 5: " + se.ServerMessage + "); fix the configured token", se) { Address = addr, ServerCode = se.Code }, null, true);
                        bool rej = se.Code == ErrorCode.UnsupportedVersion || se.Code == ErrorCode.InvalidArgument;
                        throw new HelloException(se, null, rej);
                    }
                case FrameType.Capacity:
                    s.Dispose();
                    throw new HelloException(new CapacityException("the server " + addr + " refused the connection: it is at its connection limit (" + (CapacityReason)first.Reason + "); retry later", (CapacityReason)first.Reason) { Address = addr }, null, true);
                default:
                    s.Dispose();
                    throw new HelloException(new TicketingException("the server " + addr + " answered the hello with an unexpected " + FrameType.Name(first.Type) + " frame"), null, true);
            }
            var c = new Connection(addr, tcp, s, hooks, first.Count);
            c.NodeId = Encoding.UTF8.GetString(first.Text);
            c.Leader = (first.Flags & Codec.ReadyLeader) != 0;
            c.Interval = TimeSpan.FromMilliseconds(first.IntervalMs);
            if (first.IntervalMs == 0)
            {
                // The server sends no pings: the client pings to notice a silent server.
                c.ownPing = cfg.OwnPingInterval;
                c.Silence = TimeSpan.FromTicks(cfg.OwnPingInterval.Ticks * 3);
            }
            else
            {
                c.Silence = TimeSpan.FromTicks(c.Interval.Ticks * 3);
            }
            tcp.ReceiveTimeout = 0; // the watchdog detects silence
            tcp.SendTimeout = (int)Math.Min(int.MaxValue, Math.Max(c.Silence.TotalMilliseconds, 10000));
            c.StartThreads();
            return c;
        }

        /// <summary>Whether host:port completes a TLS handshake (any certificate accepted: this only tells TLS from plain).</summary>
        static bool AnswersTls(string host, int port, TimeSpan timeout, CancellationToken ct)
        {
            try
            {
                using (var t = new TcpClient())
                using (ct.Register(() => Abort(t)))
                {
                    var connect = t.ConnectAsync(host, port);
                    if (!connect.Wait(timeout)) return false;
                    t.ReceiveTimeout = (int)timeout.TotalMilliseconds;
                    t.SendTimeout = (int)timeout.TotalMilliseconds;
                    using (var ssl = new SslStream(t.GetStream(), false, (a, b, c, d) => true))
                    {
                        ssl.AuthenticateAsClient(host, null, SslProtocols.None, false);
                        return true;
                    }
                }
            }
            catch (Exception)
            {
                return false;
            }
        }

        static HelloException TlsFailure(string addr, Exception e, string why, bool certRequested, TlsSettings tls, RecordingStream rec)
        {
            if (why != null)
                return new HelloException(new TicketingException("the TLS certificate of " + addr + " was refused: " + why, e), null, true);
            byte[] head = rec.First();
            if (head.Length >= 5 && head[0] == 0 && head[4] == FrameType.Error)
                return new HelloException(new TicketingException("the server " + addr + " answered the TLS handshake with a Ticketing frame: it does not use TLS (configure TlsMode.Off, or enable TLS on the server)", e), null, true);
            if (certRequested)
                return new HelloException(new UnauthenticatedException("the server " + addr + " refused the TLS handshake after asking for a client certificate: it refused " +
                    (tls.Client != null ? "the client certificate" : "the connection without one (configure TlsMode.WithClientCert)"), e), null, true);
            return new HelloException(new TicketingException("the TLS handshake with " + addr + " failed: " + e.Message, e), null, false);
        }

        void StartThreads()
        {
            var r = new Thread(ReadLoop) { IsBackground = true, Name = "ticketing reader " + Addr };
            var w = new Thread(WriteLoop) { IsBackground = true, Name = "ticketing writer " + Addr };
            r.Start();
            w.Start();
            var period = ownPing > TimeSpan.Zero ? ownPing : TimeSpan.FromTicks(Math.Max(Silence.Ticks / 6, TimeSpan.FromMilliseconds(5).Ticks));
            watchdog = new Timer(_ => Tick(), null, period, period);
        }

        // ---------------- reading ----------------

        void ReadLoop()
        {
            var head = new byte[4];
            for (;;)
            {
                Frame f;
                try
                {
                    f = Codec.ReadFrame(stream, head);
                }
                catch (WireException e)
                {
                    Fail(new ConnFailure { Kind = FailKind.Protocol, Addr = Addr, Cause = e });
                    return;
                }
                catch (Exception e)
                {
                    Fail(new ConnFailure { Kind = FailKind.Drop, Addr = Addr, Cause = e });
                    return;
                }
                if (f == null)
                {
                    Fail(new ConnFailure { Kind = FailKind.Drop, Addr = Addr, Cause = new EndOfStreamException("closed by the server") });
                    return;
                }
                Interlocked.Exchange(ref lastRecv, Stopwatch.GetTimestamp());
                var fl = Dispatch(f);
                if (fl != null)
                {
                    Fail(fl);
                    return;
                }
            }
        }

        void Tick()
        {
            long quiet = Stopwatch.GetTimestamp() - Interlocked.Read(ref lastRecv);
            var q = TimeSpan.FromSeconds((double)quiet / Stopwatch.Frequency);
            if (q > Silence)
            {
                Fail(new ConnFailure { Kind = FailKind.Silent, Addr = Addr, Quiet = Silence });
                return;
            }
            if (ownPing > TimeSpan.Zero)
            {
                lock (mu)
                {
                    if (failure != null) return;
                    Codec.Append(wbuf, new Frame { Type = FrameType.Ping, Nonce = (ulong)Interlocked.Increment(ref pingNonce) });
                    Monitor.PulseAll(mu);
                }
            }
        }

        static bool Answers(byte req, byte ans)
        {
            if (ans == FrameType.Forbidden) // a refusal is the final answer of any request but C
                return req == FrameType.Acquire || req == FrameType.Release || req == FrameType.ReleaseOwner || req == FrameType.Describe;
            switch (req)
            {
                case FrameType.Acquire:
                    return ans == FrameType.Granted || ans == FrameType.NotAcquired || ans == FrameType.Queued ||
                        ans == FrameType.Cancelled || ans == FrameType.Capacity;
                case FrameType.Release:
                case FrameType.ReleaseOwner:
                    return ans == FrameType.Released || ans == FrameType.NotHeld || ans == FrameType.Capacity;
                case FrameType.Describe:
                    return ans == FrameType.Info || ans == FrameType.Capacity;
            }
            return false;
        }

        /// <summary>Handles one received frame; a non-null result ends the connection.</summary>
        ConnFailure Dispatch(Frame f)
        {
            switch (f.Type)
            {
                case FrameType.Ping:
                    lock (mu)
                    {
                        if (failure == null)
                        {
                            Codec.Append(wbuf, new Frame { Type = FrameType.Pong, Nonce = f.Nonce });
                            Monitor.PulseAll(mu);
                        }
                    }
                    return null;
                case FrameType.Pong:
                    return null;
                case FrameType.NotLeader:
                    {
                        var hint = Encoding.UTF8.GetString(f.Text);
                        return new ConnFailure { Kind = FailKind.NotLeader, Addr = Addr, Hint = hint, Cause = new NotLeaderException(Addr, hint) };
                    }
                case FrameType.Error:
                    return new ConnFailure { Kind = FailKind.ServerError, Addr = Addr, Cause = new ServerErrorException(Addr, (ErrorCode)f.Code, Encoding.UTF8.GetString(f.Text)) };
                case FrameType.Granted:
                case FrameType.NotAcquired:
                case FrameType.Queued:
                case FrameType.Cancelled:
                case FrameType.Capacity:
                case FrameType.Released:
                case FrameType.NotHeld:
                case FrameType.Info:
                case FrameType.Forbidden:
                    break;
                default:
                    return Protocol("unexpected " + FrameType.Name(f.Type) + " frame from the server");
            }
            Call cl;
            TaskCompletionSource<bool> settled = null;
            bool late;
            lock (mu)
            {
                if (failure != null) return null;
                if (!pending.TryGetValue(f.Id, out cl))
                    return Protocol(FrameType.Name(f.Type) + " frame for request id " + f.Id + ", which is not in flight");
                if (!Answers(cl.Type, f.Type))
                    return Protocol(FrameType.Name(f.Type) + " frame answers request id " + f.Id + ", which is a " + FrameType.Name(cl.Type));
                if (f.Type == FrameType.Queued)
                {
                    if (cl.Queued) return Protocol("second Q frame for request id " + f.Id);
                    cl.Queued = true;
                    return null;
                }
                pending.Remove(f.Id);
                // Close waits for this (CancelAcquiresForClose); it is told
                // only after a late grant's release was queued below, or Close
                // could stop the releaser first.
                if (acquiresSettled != null && cl.Type == FrameType.Acquire && !AnyAcquirePendingLocked())
                    settled = acquiresSettled;
                var sem = Slots(cl.Type);
                if (sem != null) sem.Release();
                if (!cl.Abandoned)
                {
                    cl.Res.TrySetResult(new Answer { F = f });
                    if (settled != null) settled.TrySetResult(true);
                    return null;
                }
                late = f.Type == FrameType.Granted && cl.Type == FrameType.Acquire && hooks != null;
            }
            // A grant for a caller that left: released outside the lock (the
            // hook may report to the user's observer).
            if (late) hooks.LateGrant(cl.Key, f.Token);
            if (settled != null) settled.TrySetResult(true);
            return null;
        }

        ConnFailure Protocol(string why)
        {
            return new ConnFailure { Kind = FailKind.Protocol, Addr = Addr, Cause = new TicketingException(why) };
        }

        // ---------------- writing ----------------

        void WriteLoop()
        {
            for (;;)
            {
                Writer buf;
                lock (mu)
                {
                    while (wbuf.Length == 0 && failure == null) Monitor.Wait(mu);
                    if (failure != null) return;
                    buf = wbuf;
                    wbuf = spare;
                    wbuf.Reset();
                }
                try
                {
                    stream.Write(buf.Raw, 0, buf.Length);
                    stream.Flush();
                }
                catch (Exception e)
                {
                    Fail(new ConnFailure { Kind = FailKind.Drop, Addr = Addr, Cause = e });
                    return;
                }
                lock (mu)
                {
                    buf.Reset();
                    spare = buf;
                }
            }
        }

        // ---------------- life cycle ----------------

        /// <summary>Ends the connection once; every pending caller gets f.</summary>
        internal void Fail(ConnFailure f)
        {
            List<Call> pend;
            lock (mu)
            {
                if (failure != null) return;
                failure = f;
                pend = new List<Call>(pending.Values);
                pending = new Dictionary<uint, Call>();
                wbuf.Reset();
                Monitor.PulseAll(mu);
                foreach (var cl in pend)
                {
                    // Before the caller hears of it: an IndeterminateException
                    // then always has its release by owner under way.
                    if (cl.Type == FrameType.Acquire && !f.Closed && hooks != null)
                        hooks.Orphaned(cl.Key, cl.Owner, cl.Sent + cl.Span);
                    if (!cl.Abandoned) cl.Res.TrySetResult(new Answer { Fail = f });
                }
            }
            // Shutdown first: it wakes a reader blocked in a read on every
            // runtime (a bare Close does not on all of them).
            try { tcp.Client.Shutdown(SocketShutdown.Both); } catch (Exception) { }
            try { DeadCts.Cancel(); } catch (Exception) { }
            try { if (watchdog != null) watchdog.Dispose(); } catch (Exception) { }
            try { stream.Dispose(); } catch (Exception) { }
            try { tcp.Close(); } catch (Exception) { }
            Done.TrySetResult(true);
            lock (mu) if (acquiresSettled != null) acquiresSettled.TrySetResult(true);
        }

        internal bool Dead { get { lock (mu) return failure != null; } }

        internal ConnFailure Failure { get { lock (mu) return failure; } }

        /// <summary>
        /// Registers cl and queues f for the writer. Gone: the connection ended
        /// before anything was queued (nothing was sent). Throws
        /// OperationCanceledException if ct ended first (nothing was sent).
        /// Once it returns Started the request may have been sent.
        /// </summary>
        /// <summary>The in-flight pool a request of this type counts against (null: no limit).</summary>
        SemaphoreSlim Slots(byte type)
        {
            return type == FrameType.Acquire ? semAcquire : semOther;
        }

        internal async Task<StartResult> StartAsync(Call cl, Frame f, CancellationToken ct)
        {
            var sem = Slots(cl.Type);
            if (sem != null && !sem.Wait(0))
            {
                Interlocked.Increment(ref SlotWaiters);
                try
                {
                    using (var linked = CancellationTokenSource.CreateLinkedTokenSource(ct, DeadCts.Token))
                    {
                        await sem.WaitAsync(linked.Token).ConfigureAwait(false);
                    }
                }
                catch (OperationCanceledException)
                {
                    ct.ThrowIfCancellationRequested();
                    return StartResult.Gone;
                }
                catch (ObjectDisposedException)
                {
                    ct.ThrowIfCancellationRequested();
                    return StartResult.Gone;
                }
                finally
                {
                    Interlocked.Decrement(ref SlotWaiters);
                }
            }
            lock (mu)
            {
                if (failure != null) return StartResult.Gone;
                if (ct.IsCancellationRequested)
                {
                    if (sem != null) sem.Release();
                    ct.ThrowIfCancellationRequested();
                }
                do { nextId++; } while (nextId == 0 || pending.ContainsKey(nextId));
                cl.Id = nextId;
                f.Id = nextId;
                pending[cl.Id] = cl;
                cl.Sent = Stopwatch.GetTimestamp();
                Codec.Append(wbuf, f);
                Monitor.PulseAll(mu);
            }
            return StartResult.Started;
        }

        /// <summary>
        /// Called when cl's caller stops waiting. If cl is still pending it is
        /// marked abandoned (a late G is released by the hooks) and, for an
        /// acquire, a C frame is queued; it then returns null. If the answer
        /// already arrived (or the connection failed) it returns that.
        /// </summary>
        bool AnyAcquirePendingLocked()
        {
            foreach (var p in pending.Values)
                if (p.Type == FrameType.Acquire) return true;
            return false;
        }

        /// <summary>
        /// The broker is closing: every acquire still waiting for its final
        /// answer is cancelled (C) and its caller gets closed (an indeterminate
        /// outcome); a G that still arrives is released by the hooks. The task
        /// completes when no acquire is pending any more (or the connection ended).
        /// </summary>
        internal Task CancelAcquiresForClose(ConnFailure closed)
        {
            lock (mu)
            {
                acquiresSettled = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                if (failure != null || !AnyAcquirePendingLocked())
                {
                    acquiresSettled.TrySetResult(true);
                    return acquiresSettled.Task;
                }
                foreach (var cl in pending.Values)
                {
                    if (cl.Type != FrameType.Acquire || cl.Abandoned) continue;
                    cl.Abandoned = true;
                    Codec.Append(wbuf, new Frame { Type = FrameType.Cancel, Id = cl.Id, Owner = cl.Owner });
                    cl.Res.TrySetResult(new Answer { Fail = closed });
                }
                Monitor.PulseAll(mu);
                return acquiresSettled.Task;
            }
        }

        internal Answer Abandon(Call cl)
        {
            lock (mu)
            {
                Call p;
                if (cl.Abandoned) return cl.Res.Task.Result; // cancelled by the broker's close, answered then
                if (failure == null && pending.TryGetValue(cl.Id, out p) && p == cl)
                {
                    cl.Abandoned = true;
                    if (cl.Type == FrameType.Acquire)
                    {
                        Codec.Append(wbuf, new Frame { Type = FrameType.Cancel, Id = cl.Id, Owner = cl.Owner });
                        Monitor.PulseAll(mu);
                    }
                    return null;
                }
            }
            // The answer or the failure was set under the lock before the call left the table.
            return cl.Res.Task.Result;
        }
    }

    /// <summary>Remembers the first bytes read, to explain a failed handshake.</summary>
    internal sealed class RecordingStream : Stream
    {
        readonly Stream inner;
        readonly byte[] first = new byte[16];
        int n;
        internal long Total;
        internal RecordingStream(Stream inner) { this.inner = inner; }
        internal byte[] First() { var r = new byte[n]; Buffer.BlockCopy(first, 0, r, 0, n); return r; }
        public override int Read(byte[] buffer, int offset, int count)
        {
            int k = inner.Read(buffer, offset, count);
            if (k > 0)
            {
                int c = Math.Min(k, first.Length - n);
                if (c > 0) { Buffer.BlockCopy(buffer, offset, first, n, c); n += c; }
                Total += k;
            }
            return k;
        }
        public override void Write(byte[] buffer, int offset, int count) { inner.Write(buffer, offset, count); }
        public override void Flush() { inner.Flush(); }
        public override bool CanRead { get { return true; } }
        public override bool CanWrite { get { return true; } }
        public override bool CanSeek { get { return false; } }
        public override long Length { get { throw new NotSupportedException(); } }
        public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
        public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
        public override void SetLength(long value) { throw new NotSupportedException(); }
        protected override void Dispose(bool disposing) { if (disposing) inner.Dispose(); base.Dispose(disposing); }
    }
}
