using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Ticketing
{
    /// <summary>
    /// The broker's connection to the leader: a manager task dials the
    /// servers in rounds (the last server that accepted a session first, one
    /// that just went silent last), follows the leader named by an M frame,
    /// backs off with jitter after a whole round failed, and keeps the current
    /// session and why the last attempt failed. Calls wait here for a live
    /// connection (GetConnAsync); a hello refused alike by every listed
    /// address is reported to them promptly. (The Java client's Connector, the
    /// Go client's connection manager.)
    /// </summary>
    internal sealed class Connector
    {
        readonly TicketBroker b;
        readonly Config Cfg;
        readonly CancellationTokenSource life = new CancellationTokenSource();
        readonly object mu = new object();
        Connection cur;
        TaskCompletionSource<bool> changed = NewSignal();
        bool closed, torn;
        Exception rejected; // a persistent hello refusal by every listed address alike, reported promptly
        readonly Dictionary<string, Exception> refusals = new Dictionary<string, Exception>(); // address -> its latest refusal
        Exception lastErr;  // why the last connection attempt or connection failed
        Task manager = Task.FromResult(true);
        readonly Random jitter = new Random();
        internal int Dials; // tests: connection attempts made

        internal Connector(TicketBroker b, Config cfg)
        {
            this.b = b;
            Cfg = cfg;
        }

        /// <summary>Starts the manager task.</summary>
        internal void Start() { manager = Task.Run(() => RunAsync()); }

        static TaskCompletionSource<bool> NewSignal()
        {
            return new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        }

        internal Connection Current { get { lock (mu) return cur; } }

        internal bool IsClosed { get { lock (mu) return closed; } }

        void BroadcastLocked()
        {
            changed.TrySetResult(true);
            changed = NewSignal();
        }

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
                    c = await Connection.DialAsync(addr, Cfg, 0, b, ct).ConfigureAwait(false);
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
                b.OnConnected(new ConnectedEventArgs(addr, c.NodeId ?? "", lastSession.Length > 0));
                if (lastSession.Length > 0 && lastSession != addr) b.OnLeaderChanged(new LeaderChangedEventArgs(lastSession, addr));
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
                b.OnDisconnected(new DisconnectedEventArgs(addr, f.What(), f.Cause, f.Hint));
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

        /// <summary>Turns a GetConnAsync failure into what an operation throws; nothing was sent.</summary>
        internal static Exception ConnectError(string op, string key, Exception e, CancellationToken ct, bool timeoutIsUnavailable)
        {
            string notSent = op == "connect" ? "" : "not sent: ";
            if (e is ClosedException)
                return new ClosedException(TicketBroker.Op(op, key) + "the broker is closed" + (op == "connect" ? "" : "; nothing was sent"));
            var nc = e as NoConnectionYet;
            if (nc != null)
            {
                if (timeoutIsUnavailable || !ct.IsCancellationRequested)
                {
                    if (nc.Last is WrongClusterException)
                        // No server of the pinned cluster answered: say that one of another cluster did, and was refused.
                        return new WrongClusterException(TicketBroker.Op(op, key) + notSent + nc.Message, nc.Last);
                    return new UnavailableException(TicketBroker.Op(op, key) + notSent + nc.Message, nc.Last);
                }
                return new OperationCanceledException(TicketBroker.Op(op, key) + notSent + nc.Message + "; cancelled", nc.Last, ct);
            }
            string msg = TicketBroker.Op(op, key) + notSent + "the server refused the connection (" + e.Message + "); the broker keeps retrying in the background";
            if (e is UnauthenticatedException) return new UnauthenticatedException(msg, e) { Address = ((TicketingException)e).Address, ServerCode = ((TicketingException)e).ServerCode };
            if (e is WrongClusterException) return new WrongClusterException(msg, e);
            var ce = e as CapacityException;
            if (ce != null) return new CapacityException(msg, ce.Reason) { Address = ce.Address };
            var te = e as TicketingException;
            return new UnavailableException(msg, e) { ServerCode = te != null ? te.ServerCode : null };
        }

        /// <summary>Waits for a connection for at most timeout (InfiniteTimeSpan: as long as ct allows); see TicketBroker.WaitReadyAsync.</summary>
        internal async Task WaitReadyAsync(TimeSpan timeout, CancellationToken ct)
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
                        throw new OperationCanceledException(TicketBroker.Op("connect", null) + nc.Message + "; cancelled", nc.Last, ct);
                    if (nc != null)
                        throw new UnavailableException(TicketBroker.Op("connect", null) + nc.Message + " within " + timeout.TotalMilliseconds + " ms", nc.Last);
                    throw ConnectError("connect", null, e, ct, true);
                }
            }
        }

        // ---------------- closing ----------------

        /// <summary>Marks the broker closed (calls that have sent nothing end with ClosedException); false if it already was.</summary>
        internal bool MarkClosed()
        {
            lock (mu)
            {
                if (closed) return false;
                closed = true;
                BroadcastLocked();
                return true;
            }
        }

        /// <summary>Ends the connection and the manager once the drain is over: not even draining releases get a connection any more.</summary>
        internal async Task TearDownAsync()
        {
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
        }
    }
}
