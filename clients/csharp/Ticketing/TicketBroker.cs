using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing
{
    /// <summary>
    /// The client: one per process, safe for concurrent use by any number of
    /// threads. It keeps one connection to the cluster leader and multiplexes
    /// every request over it, reconnecting in the background (to the leader
    /// named by an M frame, otherwise to the listed addresses in turn, with
    /// jittered exponential backoff).
    /// </summary>
    public sealed partial class TicketBroker : IDisposable, IAsyncDisposable, IConnHooks
    {
        /// <summary>Longest wait in the key's queue (0 is one immediate attempt).</summary>
        public static readonly TimeSpan MaxWait = TimeSpan.FromSeconds(255);
        /// <summary>Shortest lease.</summary>
        public static readonly TimeSpan MinLease = TimeSpan.FromSeconds(1);
        /// <summary>Longest lease, and longest work budget.</summary>
        public static readonly TimeSpan MaxLease = TimeSpan.FromSeconds(250);
        /// <summary>Longest key, in UTF-8 bytes.</summary>
        public static readonly int MaxKeyBytes = 1024;
        /// <summary>The former name of MaxKeyBytes.</summary>
        [Obsolete("Renamed MaxKeyBytes (the unit in the name); MaxKey will be removed in a later version.")]
        public static readonly int MaxKey = MaxKeyBytes;
        /// <summary>How long a release (explicit, background or compensating) retries the exact token, from the call or from when it was queued.</summary>
        public static readonly TimeSpan ReleaseBound = TimeSpan.FromSeconds(5);
        /// <summary>Default capacity of the background release queue (TicketBrokerBuilder.ReleaseQueue).</summary>
        public static readonly int DefaultReleaseQueue = 1024;
        /// <summary>How many background releases run at the same time.</summary>
        public static readonly int ReleaseWorkers = 4;
        /// <summary>Default bound of one connection attempt: TCP, TLS and hello (TicketBrokerBuilder.DialTimeout).</summary>
        public static readonly TimeSpan DefaultDialTimeout = TimeSpan.FromSeconds(5);
        /// <summary>
        /// Default bound of every call, with or without a cancellation token
        /// (TicketBrokerBuilder.OperationTimeout); an acquire's wait is added to it.
        /// </summary>
        public static readonly TimeSpan DefaultOperationTimeout = TimeSpan.FromSeconds(10);
        /// <summary>Assumed worst-case clock rate difference, percent of lease plus queued time.</summary>
        public static readonly int ClockDriftPercent = 1;
        /// <summary>Fixed margin subtracted from the deadline for millisecond truncation.</summary>
        public static readonly TimeSpan ClockDriftMargin = TimeSpan.FromMilliseconds(100);

        internal readonly Config Cfg;
        readonly CancellationTokenSource life = new CancellationTokenSource();
        readonly object mu = new object();
        Connection cur;
        TaskCompletionSource<bool> changed = NewSignal();
        bool closed, torn;
        Exception rejected; // a persistent hello refusal by every listed address alike, reported promptly
        readonly Dictionary<string, Exception> refusals = new Dictionary<string, Exception>(); // address -> its latest refusal
        Exception lastErr;  // why the last connection attempt or connection failed
        readonly Releaser rel;
        readonly Task manager;
        readonly TaskCompletionSource<bool> closedDone = NewSignal();
        readonly Random jitter = new Random();
        internal int Dials; // tests: connection attempts made
        internal Connection CurrentForTests { get { lock (mu) return cur; } }

        /// <summary>
        /// A session with a server began (the first connection, and every
        /// reconnect). Raised on the broker's connection task: handlers must
        /// return quickly; an exception they throw is ignored.
        /// </summary>
        public event EventHandler<ConnectedEventArgs> Connected;

        /// <summary>
        /// A session ended (dropped, silent, the server stopped leading or
        /// sent an error; not when the broker is closed). Calls wait for the
        /// reconnect. Raised like Connected.
        /// </summary>
        public event EventHandler<DisconnectedEventArgs> Disconnected;

        /// <summary>A new session is with another server than the previous one (a leader change or failover). Raised like Connected, after it.</summary>
        public event EventHandler<LeaderChangedEventArgs> LeaderChanged;

        /// <summary>
        /// A release that no caller awaits failed: Ticket.Dispose and
        /// DisposeAsync, and the compensating release of a grant that arrived
        /// after its caller left. Raised on the releasing thread: handlers
        /// must return quickly; an exception they throw is ignored.
        /// </summary>
        public event EventHandler<ReleaseFailedEventArgs> ReleaseFailed;

        /// <summary>Calls an event's handlers, ignoring what they throw.</summary>
        void Raise<T>(EventHandler<T> handlers, T args) where T : EventArgs
        {
            if (handlers == null) return;
            foreach (EventHandler<T> h in handlers.GetInvocationList())
            {
                try { h(this, args); } catch (Exception) { }
            }
        }

        internal TicketBroker(Config cfg)
        {
            Cfg = cfg;
            rel = new Releaser(this);
            manager = Task.Run(() => RunAsync());
        }

        static TaskCompletionSource<bool> NewSignal()
        {
            return new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        }

        /// <summary>
        /// A broker for the comma-separated server addresses ("host:port,host:port"),
        /// without token or TLS. It returns at once and connects in the
        /// background; use WaitReadyAsync.
        /// </summary>
        /// <param name="addresses">host:port[,host:port...]</param>
        /// <returns>The broker; one per process, disposed when the application ends.</returns>
        /// <exception cref="ArgumentNullException">addresses is null.</exception>
        /// <exception cref="ArgumentException">addresses is empty or an address is not host:port.</exception>
        public static TicketBroker Connect(string addresses)
        {
            return CreateBuilder().Addresses(addresses).Connect();
        }

        /// <summary>A builder for a broker with a token, TLS or other options.</summary>
        /// <returns>A new builder.</returns>
        public static TicketBrokerBuilder CreateBuilder() { return new TicketBrokerBuilder(); }

        internal static string[] ParseAddresses(string s)
        {
            var list = new List<string>();
            foreach (var part in (s ?? "").Split(','))
            {
                var a = part.Trim();
                if (a.Length == 0) continue;
                string host; int port;
                Connection.SplitAddr(a, out host, out port);
                list.Add(a);
            }
            if (list.Count == 0) throw new ArgumentException("ticketing: the address list \"" + s + "\" is empty; give host:port[,host:port...]", "addresses");
            return list.ToArray();
        }

        void BroadcastLocked()
        {
            changed.TrySetResult(true);
            changed = NewSignal();
        }

        // ---------------- connection manager ----------------

        async Task RunAsync()
        {
            // follows: leader hints followed since the last backoff, at most
            // addresses + 2 in a row (the Go client's rule, docs/protocol.md):
            // the whole list once plus a leader change, never a storm between
            // two servers that name each other.
            int failures = 0, follows = 0, maxFollows = Cfg.Addrs.Length + 2;
            string hint = "";
            // One round of attempts, as in the Go client: the last server that
            // accepted a session, then the configured addresses in order, each
            // once; the broker backs off only after a whole round failed.
            var round = new List<string>();
            string lastGood = "";
            string lastSession = ""; // the server of the previous session, for Connected and LeaderChanged
            string lastDead = ""; // the server whose session just died (silent or dropped): dialed last
            var ct = life.Token;
            while (!ct.IsCancellationRequested)
            {
                string addr = hint;
                hint = "";
                if (addr.Length == 0)
                {
                    if (round.Count == 0)
                    {
                        if (lastGood.Length > 0) round.Add(lastGood);
                        foreach (var a in Cfg.Addrs) if (!round.Contains(a)) round.Add(a);
                        if (lastDead.Length > 0 && round.Remove(lastDead))
                        {
                            // A paused or cut-off server still accepts TCP (the
                            // kernel answers), so dialing it first would cost the
                            // failover a dial; try it after the others.
                            round.Add(lastDead);
                        }
                    }
                    addr = round[0];
                    round.RemoveAt(0);
                }
                else round.Remove(addr); // tried now, not again in this round
                Connection c;
                try
                {
                    Interlocked.Increment(ref Dials);
                    c = await Connection.DialAsync(addr, Cfg, 0, this, ct).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    if (ct.IsCancellationRequested) return;
                    var he = e as HelloException;
                    lock (mu)
                    {
                        lastErr = he != null ? he.Err : e;
                        if (he != null && he.Rejected) refusals[addr] = he.Err;
                        else refusals.Remove(addr);
                        rejected = RefusedByAllLocked();
                        BroadcastLocked();
                    }
                    if (he != null && he.Hint.Length > 0 && he.Hint != addr && follows < maxFollows)
                    {
                        follows++;
                        hint = he.Hint;
                        continue;
                    }
                    if (round.Count > 0) continue; // the next address of this round at once
                    follows = 0;
                    failures++;
                    if (!await SleepAsync(Backoff(failures), ct).ConfigureAwait(false)) return;
                    continue;
                }
                lastGood = addr;
                lastDead = "";
                round.Clear(); // after this session, a new round starts with it
                lock (mu)
                {
                    if (torn)
                    {
                        c.Fail(new ConnFailure { Kind = FailKind.Closed, Addr = addr });
                        return;
                    }
                    cur = c;
                    refusals.Remove(addr);
                    rejected = null;
                    lastErr = null;
                    BroadcastLocked();
                }
                Raise(Connected, new ConnectedEventArgs(addr, c.NodeId ?? "", lastSession.Length > 0));
                if (lastSession.Length > 0 && lastSession != addr) Raise(LeaderChanged, new LeaderChangedEventArgs(lastSession, addr));
                lastSession = addr;
                await c.Done.Task.ConfigureAwait(false);
                var f = c.Failure;
                lock (mu)
                {
                    if (cur == c) cur = null;
                    if (!f.Closed) lastErr = new TicketingException(f.What(), f.Cause);
                    BroadcastLocked();
                }
                if (ct.IsCancellationRequested || f.Closed) return;
                Raise(Disconnected, new DisconnectedEventArgs(addr, f.What(), f.Cause, f.Hint));
                if (f.Kind == FailKind.Silent || f.Kind == FailKind.Drop) lastDead = addr;
                if (Stopwatch.GetTimestamp() - c.Born > Stopwatch.Frequency) failures = follows = 0;
                if (f.Kind == FailKind.NotLeader && f.Hint.Length > 0 && f.Hint != addr && follows < maxFollows)
                {
                    follows++;
                    hint = f.Hint;
                    continue;
                }
                follows = 0;
                failures++;
                if (!await SleepAsync(Backoff(failures), ct).ConfigureAwait(false)) return;
            }
        }

        /// <summary>A listed server's refusal as a server of another cluster, or null. mu is held.</summary>
        WrongClusterException WrongClusterLocked()
        {
            foreach (var a in Cfg.Addrs)
            {
                Exception r;
                if (refusals.TryGetValue(a, out r) && r is WrongClusterException) return (WrongClusterException)r;
            }
            return null;
        }

        /// <summary>
        /// The cluster this broker is pinned to (32 hex digits): the one given
        /// to the builder's ClusterId, or the cluster of the first server that
        /// reported one; null until then.
        /// </summary>
        public string ClusterId { get { return Cfg.Pin.Get(); } }

        /// <summary>
        /// The refusal to report when every listed address refused the hello for
        /// the same reason (same exception type and server code), else null: as in
        /// the Go client, a refusal by one node only moves the broker on to the
        /// next, and calls wait for a connection. mu is held.
        /// </summary>
        Exception RefusedByAllLocked()
        {
            Exception first;
            if (!refusals.TryGetValue(Cfg.Addrs[0], out first)) return null;
            var firstCode = first is TicketingException ? ((TicketingException)first).ServerCode : null;
            foreach (var a in Cfg.Addrs)
            {
                Exception r;
                if (!refusals.TryGetValue(a, out r) || r.GetType() != first.GetType()) return null;
                var code = r is TicketingException ? ((TicketingException)r).ServerCode : null;
                if (code != firstCode) return null;
            }
            return first;
        }

        /// <summary>Exponential delay with jitter: uniform in [d/2, d], d doubling from the base up to the cap.</summary>
        TimeSpan Backoff(int n)
        {
            long d = Cfg.BackoffBase.Ticks;
            for (int i = 1; i < n && d < Cfg.BackoffMax.Ticks; i++) d *= 2;
            d = Math.Min(d, Cfg.BackoffMax.Ticks);
            double r;
            lock (jitter) r = jitter.NextDouble();
            return TimeSpan.FromTicks(d / 2 + (long)(r * (d / 2)));
        }

        static async Task<bool> SleepAsync(TimeSpan d, CancellationToken ct)
        {
            try { await Task.Delay(d, ct).ConfigureAwait(false); return true; }
            catch (OperationCanceledException) { return false; }
        }

        void IConnHooks.LateGrant(string key, ulong token) { LateGrant(key, token); }

        internal bool IsClosed { get { lock (mu) return closed; } }

        /// <summary>An acquire's connection ended before its final answer: release by owner (U) on a later connection.</summary>
        void IConnHooks.Orphaned(string key, byte[] owner, long until) { rel.EnqueueOwner(key, owner, until); }

        /// <summary>Waits for the next change of the connection state; false when ct ended first.</summary>
        internal async Task<bool> WaitChangeAsync(CancellationToken ct)
        {
            Task wake;
            lock (mu) wake = changed.Task;
            var tcs = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            using (ct.Register(() => tcs.TrySetResult(true)))
            {
                await Task.WhenAny(wake, tcs.Task).ConfigureAwait(false);
            }
            return !ct.IsCancellationRequested;
        }

        /// <summary>The outcome of a background or disposing release, to the release observer.</summary>
        internal void ReportRelease(string key, ulong token, Exception err)
        {
            var obs = Cfg.Observer;
            if (obs != null)
            {
                try { obs(key, token, err); } catch (Exception) { }
            }
            if (err != null) Raise(ReleaseFailed, new ReleaseFailedEventArgs(key, token, err));
        }

        /// <summary>A G arrived for an acquire whose caller left (or too late for its budget): release that exact token in the background.</summary>
        internal void LateGrant(string key, ulong token)
        {
            rel.Enqueue(new RelJob { Key = key, Token = token, At = Stopwatch.GetTimestamp() });
        }

        /// <summary>No connection before the caller's token ended.</summary>
        internal sealed class NoConnectionYet : Exception
        {
            internal readonly Exception Last;
            internal NoConnectionYet(Exception last) : base(last != null ? "no connection to the leader yet (last attempt: " + last.Message + ")" : "no connection to the leader yet") { Last = last; }
        }

        /// <summary>
        /// A live connection to the leader, waiting for one while ct allows.
        /// Throws ClosedException, the persistent refusal, or NoConnectionYet.
        /// </summary>
        internal async Task<Connection> GetConnAsync(CancellationToken ct, bool draining)
        {
            for (;;)
            {
                Task wake;
                lock (mu)
                {
                    if (torn || (closed && !draining)) throw new ClosedException("ticketing: the broker is closed");
                    if (cur != null && !cur.Dead) return cur;
                    if (rejected != null) throw rejected;
                    wake = changed.Task;
                }
                if (ct.CanBeCanceled)
                {
                    var tcs = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                    using (ct.Register(() => tcs.TrySetResult(true)))
                    {
                        await Task.WhenAny(wake, tcs.Task).ConfigureAwait(false);
                    }
                }
                else
                {
                    await wake.ConfigureAwait(false);
                }
                if (ct.IsCancellationRequested)
                {
                    Exception last;
                    lock (mu)
                    {
                        if (torn || (closed && !draining)) throw new ClosedException("ticketing: the broker is closed");
                        if (cur != null && !cur.Dead) return cur;
                        last = rejected ?? WrongClusterLocked() ?? lastErr;
                    }
                    throw new NoConnectionYet(last);
                }
            }
        }

        internal static string Op(string op, string key)
        {
            return "ticketing: " + op + (key != null ? " \"" + key + "\"" : "") + ": ";
        }

        /// <summary>Turns a GetConnAsync failure into what an operation throws; nothing was sent.</summary>
        internal static Exception ConnectError(string op, string key, Exception e, CancellationToken ct, bool timeoutIsUnavailable)
        {
            string notSent = op == "connect" ? "" : "not sent: ";
            if (e is ClosedException)
                return new ClosedException(Op(op, key) + "the broker is closed" + (op == "connect" ? "" : "; nothing was sent"));
            var nc = e as NoConnectionYet;
            if (nc != null)
            {
                if (timeoutIsUnavailable || !ct.IsCancellationRequested)
                {
                    if (nc.Last is WrongClusterException)
                        // No server of the pinned cluster answered: say that one of another cluster did, and was refused.
                        return new WrongClusterException(Op(op, key) + notSent + nc.Message, nc.Last);
                    return new UnavailableException(Op(op, key) + notSent + nc.Message, nc.Last);
                }
                return new OperationCanceledException(Op(op, key) + notSent + nc.Message + "; cancelled", nc.Last, ct);
            }
            string msg = Op(op, key) + notSent + "the server refused the connection (" + e.Message + "); the broker keeps retrying in the background";
            if (e is UnauthenticatedException) return new UnauthenticatedException(msg, e) { Address = ((TicketingException)e).Address, ServerCode = ((TicketingException)e).ServerCode };
            if (e is WrongClusterException) return new WrongClusterException(msg, e);
            var ce = e as CapacityException;
            if (ce != null) return new CapacityException(msg, ce.Reason) { Address = ce.Address };
            var te = e as TicketingException;
            return new UnavailableException(msg, e) { ServerCode = te != null ? te.ServerCode : null };
        }

        /// <summary>
        /// Waits until the broker is connected to the leader and the hello is
        /// done. Throws promptly UnauthenticatedException (a refused token or
        /// client certificate), or UnavailableException / CapacityException for
        /// another persistent refusal (unsupported version, untrusted server
        /// certificate, TLS on one side only, connection limit), while the
        /// server refuses the connection; the broker keeps retrying in the
        /// background.
        /// </summary>
        /// <param name="timeout">How long to wait; Timeout.InfiniteTimeSpan for as long as cancellationToken allows.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <returns>A task that completes once a connection to the leader is ready.</returns>
        /// <exception cref="UnavailableException">timeout passed first (the message says what the last attempt ran into), or a persistent refusal.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="CapacityException">Every server is at its connection limit.</exception>
        /// <exception cref="ClosedException">The broker was closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        /// <exception cref="ArgumentOutOfRangeException">timeout is negative (other than Timeout.InfiniteTimeSpan).</exception>
        public Task WaitReadyAsync(TimeSpan timeout, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (timeout < TimeSpan.Zero && timeout != Timeout.InfiniteTimeSpan)
                throw new ArgumentOutOfRangeException("timeout", timeout, "ticketing: the timeout must not be negative");
            return WaitReadyCoreAsync(timeout, cancellationToken);
        }

        async Task WaitReadyCoreAsync(TimeSpan timeout, CancellationToken ct)
        {
            using (var lim = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                if (timeout != Timeout.InfiniteTimeSpan) lim.CancelAfter(timeout);
                try
                {
                    await GetConnAsync(lim.Token, false).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    var nc = e as NoConnectionYet;
                    if (nc != null && ct.IsCancellationRequested)
                        throw new OperationCanceledException(Op("connect", null) + nc.Message + "; cancelled", nc.Last, ct);
                    if (nc != null)
                        throw new UnavailableException(Op("connect", null) + nc.Message + " within " + timeout.TotalMilliseconds + " ms", nc.Last);
                    throw ConnectError("connect", null, e, ct, true);
                }
            }
        }

        /// <summary>
        /// Waits for the connection for at most the operation timeout, or less
        /// when cancellationToken ends sooner (see the overload with a
        /// timeout, which takes Timeout.InfiniteTimeSpan to wait as long as
        /// the token allows).
        /// </summary>
        /// <param name="cancellationToken">Ends the wait sooner than the operation timeout.</param>
        /// <returns>A task that completes once a connection to the leader is ready.</returns>
        /// <exception cref="UnavailableException">The operation timeout passed first, or a persistent refusal.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="ClosedException">The broker was closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task WaitReadyAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return WaitReadyAsync(Cfg.OperationTimeout, cancellationToken);
        }

        // ---------------- closing ----------------

        /// <summary>
        /// Closes the broker, releasing what it can still reach first: acquires
        /// still waiting for their answer are cancelled (C) and their callers
        /// get IndeterminateException with BrokerClosed set; a grant that races
        /// with the cancel and arrives within a grace period (up to
        /// ReleaseBound, 5 s) is released with its exact token. Calls that had sent nothing
        /// end with ClosedException. Background releases already queued get the
        /// same grace period to finish while the connection is still open;
        /// whatever remains is abandoned and reported to the release observer
        /// (those tickets expire with their lease). Both run at once, within
        /// about ReleaseBound (5 s) in all. Safe to call more than once.
        /// </summary>
        /// <returns>A task that completes when the broker is closed; it never fails.</returns>
        public async Task CloseAsync()
        {
            bool already;
            lock (mu)
            {
                already = closed;
                if (!closed)
                {
                    closed = true;
                    BroadcastLocked();
                }
            }
            if (already)
            {
                await closedDone.Task.ConfigureAwait(false);
                return;
            }
            // Release what can still be reached: cancel the acquires still
            // waiting, and give a grant that races with the cancel the grace
            // period to arrive, so that it is released rather than left to its lease.
            // Both phases run at once under one bound (DrainTimeout): the
            // releaser keeps accepting jobs until the cancelled acquires have
            // settled, so a late grant is still queued and released.
            Connection live;
            lock (mu) live = cur;
            Task acquiresSettled = Task.FromResult(true);
            if (live != null && !live.Dead)
            {
                var settled = live.CancelAcquiresForClose(new ConnFailure { Kind = FailKind.Closed, Addr = live.Addr });
                acquiresSettled = Task.WhenAny(settled, Task.Delay(Cfg.DrainTimeout));
            }
            await rel.DrainAsync(Cfg.DrainTimeout, acquiresSettled).ConfigureAwait(false);
            Connection c;
            lock (mu)
            {
                torn = true;
                c = cur;
                BroadcastLocked();
            }
            life.Cancel();
            if (c != null) c.Fail(new ConnFailure { Kind = FailKind.Closed, Addr = c.Addr });
            try { await manager.ConfigureAwait(false); } catch (Exception) { }
            closedDone.TrySetResult(true);
        }

        /// <summary>
        /// Closes the broker (CloseAsync) and waits for it: blocks for at most
        /// about ReleaseBound (5 s, the drain period), plus the time to stop
        /// the connection's threads.
        /// </summary>
        public void Dispose()
        {
            CloseAsync().GetAwaiter().GetResult();
        }

        /// <summary>Closes the broker (CloseAsync): completes within about ReleaseBound (5 s).</summary>
        /// <returns>A task that completes when the broker is closed.</returns>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(CloseAsync());
        }
    }
}
