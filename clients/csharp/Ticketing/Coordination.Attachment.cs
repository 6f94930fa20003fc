using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing.Coordination
{
    /// <summary>
    /// One coordination session's attachment to the cluster: it attaches the
    /// session (on the broker's connection when the server carries many
    /// sessions on one connection, else on a connection of its own), restores
    /// it after a lost connection, keeps its conservative deadline
    /// (docs/protocol.md, "A coordination session's deadline"), keeps it alive,
    /// and sends the session's requests. Semaphores and nodes are request
    /// builders over it.
    /// </summary>
    internal sealed class Attachment
    {
        internal static readonly TimeSpan DefaultGrace = TimeSpan.FromSeconds(10);
        static readonly TimeSpan StopBound = TimeSpan.FromSeconds(10);

        internal readonly TicketBroker Broker;
        internal readonly string Path;
        internal readonly TimeSpan Timeout;
        readonly byte[] pathBytes;
        readonly byte[] key = new byte[16];
        readonly byte[] desc;
        readonly Action<Attachment> onEnded;

        readonly object mu = new object();
        ulong id, seq;
        Link link;
        TaskCompletionSource<bool> attached = NewSignal();
        SessionState state;
        Exception ended;
        readonly CancellationTokenSource life = new CancellationTokenSource(); // ends with the session
        CancellationTokenSource holds;     // ends at the deadline or the session's end
        Exception holdsReason;
        long confirmed, deadline;          // Stopwatch ticks; 0: none yet
        Timer timer;
        TimeSpan grace = DefaultGrace;
        Connection lastShared;             // the broker's connection the session was last attached on
        bool stopped;                      // the server confirmed the session's end
        readonly Dictionary<string, SemaphoreLease> leases = new Dictionary<string, SemaphoreLease>();
        readonly HashSet<TaskCompletionSource<SemaphoreChange>> watches = new HashSet<TaskCompletionSource<SemaphoreChange>>();
        readonly Dictionary<string, Task> withdrawing = new Dictionary<string, Task>();
        internal readonly SerialQueue Callbacks = new SerialQueue(); // the caller's callbacks (Queued)
        readonly SerialQueue events = new SerialQueue();             // the session's notifications: never behind a caller's callback
        readonly Action<SessionState> onState;
        readonly SerialQueue states = new SerialQueue();
        Task runTask = Task.FromResult(true);

        /// <summary>Lets t run on, its exception observed.</summary>
        internal static void Forget(Task t) { t.ContinueWith(x => { var e = x.Exception; GC.KeepAlive(e); }, TaskContinuationOptions.OnlyOnFaulted); }

        static TaskCompletionSource<bool> NewSignal() { return new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously); }

        internal Attachment(TicketBroker broker, string path, TimeSpan timeout, string description, Action<SessionState> onState, Action<Attachment> onEnded)
        {
            Broker = broker; Path = path; Timeout = timeout; this.onState = onState; this.onEnded = onEnded;
            pathBytes = Encoding.UTF8.GetBytes(path);
            desc = Encoding.UTF8.GetBytes(description ?? "");
            using (var rng = RandomNumberGenerator.Create()) rng.GetBytes(key);
        }

        /// <summary>How long after a confirmed send time the session's holds stay valid: timeout × (1 − drift) − margin.</summary>
        internal static long SpanTicks(TimeSpan timeout)
        {
            long t = timeout.Ticks;
            t -= t * TicketBroker.ClockDriftPercent / 100;
            t -= TicketBroker.ClockDriftMargin.Ticks;
            return (long)(t * (double)Stopwatch.Frequency / TimeSpan.TicksPerSecond);
        }

        internal ulong Id { get { lock (mu) return id; } }
        internal CancellationToken LifeToken { get { return life.Token; } }
        /// <summary>Tests: the confirmed send time (Stopwatch ticks).</summary>
        internal long ConfirmedTicks { get { lock (mu) return confirmed; } }
        internal Link CurrentLinkForTests { get { lock (mu) return link; } }

        CoordBody AttachBody(ulong session, ulong seqNo)
        {
            return new CoordBody { Path = pathBytes, Session = session, SeqNo = seqNo, TimeoutMs = (ulong)(Timeout.Ticks / TimeSpan.TicksPerMillisecond), Key = key, Desc = desc };
        }

        // ---------------- connections ----------------

        /// <summary>A link for the session: the broker's connection when its server carries many sessions on one, else a connection of its own to the same server.</summary>
        async Task<Link> ConnectAsync(CancellationToken ct)
        {
            Connection shared;
            try
            {
                shared = await Broker.GetConnAsync(ct, false).ConfigureAwait(false);
            }
            catch (Exception e) when (!(e is OperationCanceledException) || !ct.IsCancellationRequested)
            {
                throw Connector.ConnectError("coordination session on " + Path, null, e, ct, true);
            }
            Link l;
            if (shared.Sessions) l = new Link(shared, true);
            else
            {
                // An older server carries one session per connection: a
                // connection of the session's own, to the leader the broker found.
                Connection own;
                try
                {
                    own = await Connection.DialAsync(shared.Addr, Broker.Cfg, 0, null, ct).ConfigureAwait(false);
                }
                catch (HelloException e)
                {
                    throw new UnavailableException("ticketing: coordination session on " + Path + ": " + e.Message, e.Err);
                }
                l = new Link(own, false);
                Forget(CloseWithBrokerAsync(l));
            }
            l.Subscription = l.Conn.SubscribeCoord(f => events.Push(() => Event(l, f)));
            return l;
        }

        /// <summary>Ends a connection of the session's own when the broker is closed: the session then ends (ClosedException).</summary>
        async Task CloseWithBrokerAsync(Link l)
        {
            while (!l.Stop.IsCancellationRequested)
            {
                if (Broker.IsClosed)
                {
                    l.Fail();
                    return;
                }
                await Broker.WaitChangeAsync(l.Stop).ConfigureAwait(false);
            }
        }

        /// <summary>Sends one request on l and decodes its answer.</summary>
        internal async Task<Reply> CallOnAsync(Link l, byte op, CoordBody body, Action<Frame> note, Action<Frame> watch, CancellationToken ct)
        {
            bool forSession = l.Shared && CoordOp.IsSessionOp(op);
            if (forSession) body.Session = l.Id;
            var bytes = CoordCodec.Request(op, body, forSession);
            var r = await l.Conn.CoordCallAsync(forSession ? (byte)(op | CoordOp.ForSession) : op, bytes,
                op == CoordOp.Acquire, body.Data.Length > Connection.LargeRequest, note, watch, ct, l.Stop).ConfigureAwait(false);
            if (r.NotSent) return new Reply { LinkLost = true };
            if (r.Lost) return new Reply { LinkLost = true, Sent = r.Sent };
            if (r.F.Type == FrameType.Capacity)
                throw new CapacityException("coordination: the server refused the request: capacity (" + (CapacityReason)r.F.Reason + "); retry later with backoff", (CapacityReason)r.F.Reason) { Address = l.Conn.Addr };
            CoordBody ans;
            try
            {
                ans = CoordCodec.Reply(r.F.Op, r.F.Code, r.F.Body);
            }
            catch (WireException)
            {
                l.Fail();
                return new Reply { LinkLost = true, Sent = r.Sent };
            }
            return new Reply { Status = r.F.Code, Body = ans, Sent = r.Sent };
        }

        // ---------------- start, restore, end ----------------

        internal async Task StartAsync(CancellationToken ct)
        {
            var l = await ConnectAsync(ct).ConfigureAwait(false);
            Reply r;
            if (!l.Shared)
            {
                r = await CallOnAsync(l, CoordOp.Attach, AttachBody(0, 1), null, null, ct).ConfigureAwait(false);
            }
            else
            {
                // On the broker's connection, which lives on, an attach whose
                // caller left is still awaited: a session it created is stopped,
                // or it would never be detached, so never expire.
                var call = CallOnAsync(l, CoordOp.Attach, AttachBody(0, 1), null, null, CancellationToken.None);
                var left = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                using (ct.Register(() => left.TrySetResult(true)))
                    await Task.WhenAny(call, left.Task).ConfigureAwait(false);
                if (!call.IsCompleted)
                {
                    var conn = l.Conn;
                    Attachment.Forget(call.ContinueWith(t =>
                    {
                        if (t.Status == TaskStatus.RanToCompletion && !t.Result.LinkLost && t.Result.Status == 0) StopOn(conn, t.Result.Body.Session);
                        l.Fail();
                    }, TaskScheduler.Default));
                    throw new OperationCanceledException("coordination: start session on " + Path + ": cancelled", ct);
                }
                r = await call.ConfigureAwait(false);
            }
            if (r.LinkLost)
            {
                l.Fail();
                throw new UnavailableException("coordination: start session on " + Path + ": the connection was lost before the answer");
            }
            var err = CoordinationException.FromStatus("start session on " + Path, r.Status, r.Body.Message);
            if (err != null)
            {
                l.Fail();
                throw err;
            }
            lock (mu)
            {
                id = r.Body.Session; seq = r.Body.SeqNo; link = l; l.Id = id;
                state = SessionState.Attached;
                if (l.Shared) lastShared = l.Conn;
                attached.TrySetResult(true);
                ConfirmLocked(l, r.Sent);
            }
            SetState(SessionState.Attached);
            runTask = Task.Run(() => RunAsync());
            Attachment.Forget(Task.Run(() => KeepAliveAsync()));
        }

        /// <summary>Stops session id on the broker's connection c in the background, if c is still open.</summary>
        static void StopOn(Connection c, ulong session)
        {
            if (c.Dead) return; // the server detached it; it expires on its own
            Task.Run(async () =>
            {
                using (var cts = new CancellationTokenSource(StopBound))
                {
                    try
                    {
                        await c.CoordCallAsync(CoordOp.Stop | CoordOp.ForSession, CoordCodec.Request(CoordOp.Stop, new CoordBody { Session = session }, true),
                            false, false, null, null, cts.Token, CancellationToken.None).ConfigureAwait(false);
                    }
                    catch (Exception) { }
                }
            });
        }

        /// <summary>Restores the session whenever its connection is lost, until it ends.</summary>
        async Task RunAsync()
        {
            var lifeEnded = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            using (life.Token.Register(() => lifeEnded.TrySetResult(true)))
            {
                for (;;)
                {
                    Link l;
                    lock (mu) l = link;
                    if (l == null) return;
                    await Task.WhenAny(l.Ended.Task, lifeEnded.Task).ConfigureAwait(false);
                    lock (mu)
                    {
                        if (ended != null) return;
                        link = null;
                        state = SessionState.Detached;
                        attached = NewSignal();
                        FireWatchesLocked();
                        l.Detached.TrySetResult(true);
                    }
                    SetState(SessionState.Detached);
                    try
                    {
                        await RestoreAsync().ConfigureAwait(false);
                    }
                    catch (Exception e)
                    {
                        End(e);
                        return;
                    }
                }
            }
        }

        /// <summary>
        /// Reconnects and attaches again with a higher seq_no, for the
        /// session's timeout plus the node's grace period (a new leader keeps
        /// a detached session that long); SESSION_EXPIRED ends it sooner.
        /// </summary>
        async Task RestoreAsync()
        {
            TimeSpan window;
            lock (mu) window = Timeout + grace;
            using (var cts = CancellationTokenSource.CreateLinkedTokenSource(life.Token))
            {
                cts.CancelAfter(window);
                for (;;)
                {
                    Link l;
                    try
                    {
                        l = await ConnectAsync(cts.Token).ConfigureAwait(false);
                    }
                    catch (ClosedException e)
                    {
                        throw new ClosedException("coordination: session " + Id + ": the broker it uses was closed", e);
                    }
                    catch (Exception e)
                    {
                        if (life.IsCancellationRequested) throw new ClosedException("coordination: session " + Id + " closed");
                        throw new SessionExpiredException("coordination: session " + Id + " could not be restored within its timeout and the node's grace period (" + window + "): " + e.Message, e);
                    }
                    ulong s;
                    lock (mu) { l.Id = id; seq++; s = seq; }
                    Reply r;
                    try
                    {
                        r = await CallOnAsync(l, CoordOp.Attach, AttachBody(l.Id, s), null, null, cts.Token).ConfigureAwait(false);
                    }
                    catch (Exception e)
                    {
                        l.Fail();
                        if (life.IsCancellationRequested) throw new ClosedException("coordination: session " + Id + " closed");
                        throw new SessionExpiredException("coordination: session " + Id + ": " + e.Message, e);
                    }
                    if (r.LinkLost) continue;
                    var err = CoordinationException.FromStatus("restore session " + l.Id, r.Status, r.Body.Message);
                    if (err != null)
                    {
                        l.Fail();
                        if (err.Status == CoordinationStatus.SessionExpired || err.Status == CoordinationStatus.NotFound)
                        {
                            lock (mu) stopped = true;
                            throw new SessionExpiredException(err.Message, err) { Status = err.Status };
                        }
                        throw err;
                    }
                    lock (mu)
                    {
                        if (ended != null) { l.Fail(); throw ended; }
                        link = l;
                        state = SessionState.Attached;
                        if (l.Shared) lastShared = l.Conn;
                        ConfirmLocked(l, r.Sent);
                        attached.TrySetResult(true);
                    }
                    SetState(SessionState.Attached);
                    return;
                }
            }
        }

        /// <summary>A notification with id 0 on the session's connection (run off the reader, in order).</summary>
        void Event(Link l, Frame f)
        {
            CoordBody b;
            try { b = CoordCodec.Reply(f.Op, f.Code, f.Body); }
            catch (WireException) { return; }
            if (f.Op == CoordOp.Lost)
            {
                SemaphoreLease le = null;
                var name = Encoding.UTF8.GetString(b.Name);
                lock (mu)
                {
                    if (leases.TryGetValue(name, out le) && le.Token == b.OrderId) leases.Remove(name);
                    else le = null;
                }
                if (le != null) le.End(new LeaseLostException("coordination: " + name + ": the hold " + b.OrderId + " ended: its semaphore was deleted with force"));
            }
            else if (f.Op == CoordOp.SessionEnded)
            {
                lock (mu)
                {
                    if (b.Session != id || l != link) return;
                    stopped = true;
                }
                if (b.Reason == CoordFlag.EndStopped) End(new ClosedException("coordination: session " + b.Session + " stopped"));
                else End(new SessionExpiredException("coordination: session " + b.Session + " ended on the server (" +
                    (b.Reason == CoordFlag.EndNodeDropped ? "its node was dropped" : "it expired") + ")"));
            }
        }

        /// <summary>Ends the session once: its holds and tokens end, watches fire, a session on the broker's connection is stopped there.</summary>
        internal void End(Exception why)
        {
            Link l;
            List<SemaphoreLease> gone;
            CancellationTokenSource h;
            Connection shared;
            bool wasStopped;
            lock (mu)
            {
                if (ended != null) return;
                ended = why;
                state = SessionState.Expired;
                l = link; link = null;
                gone = new List<SemaphoreLease>(leases.Values);
                leases.Clear();
                FireWatchesLocked();
                if (timer != null) timer.Dispose();
                h = holds;
                if (holdsReason == null) holdsReason = why;
                shared = lastShared; wasStopped = stopped;
                attached.TrySetResult(true);
            }
            SetState(SessionState.Expired);
            // The leases learn why before the tokens theirs are linked to fire.
            foreach (var le in gone) le.End(why);
            try { life.Cancel(); } catch (ObjectDisposedException) { }
            if (h != null) try { h.Cancel(); } catch (ObjectDisposedException) { }
            if (l != null) l.Fail();
            if (shared != null && !wasStopped) StopOn(shared, id);
            if (onEnded != null) onEnded(this);
        }

        /// <summary>Stops the session: the server releases its holds at once.</summary>
        internal async Task CloseAsync(CancellationToken ct)
        {
            Link l;
            lock (mu)
            {
                if (ended != null) return;
                l = link;
            }
            Exception err = null;
            if (l != null)
            {
                try
                {
                    var r = await CallOnAsync(l, CoordOp.Stop, new CoordBody(), null, null, ct).ConfigureAwait(false);
                    if (!r.LinkLost && (r.Status == 0 || r.Status == (ushort)CoordinationStatus.SessionExpired))
                        lock (mu) stopped = true;
                    if (!r.LinkLost && r.Status != (ushort)CoordinationStatus.SessionExpired)
                        err = CoordinationException.FromStatus("stop session " + Id, r.Status, r.Body.Message);
                }
                catch (Exception e) { err = e; }
            }
            End(new ClosedException("coordination: session " + Id + " closed"));
            // The session may have been ended meanwhile by the server's word
            // on another thread: its link is let go of before Close returns.
            if (l != null) l.Fail();
            await runTask.ConfigureAwait(false);
            if (err != null && !(err is OperationCanceledException)) throw err;
        }

        // ---------------- the deadline ----------------

        /// <summary>
        /// The server answered, after a commit, a request sent at sent on l:
        /// the session cannot expire there before sent + timeout. Answers on a
        /// link that is not the session's current one count for nothing.
        /// </summary>
        void ConfirmLocked(Link l, long sent)
        {
            if (ended != null || l == null || l != link || l.GivenUp || sent <= confirmed) return;
            confirmed = sent;
            deadline = sent + SpanTicks(Timeout);
            if (holds == null || holds.IsCancellationRequested)
            {
                holds = CancellationTokenSource.CreateLinkedTokenSource(life.Token);
                holdsReason = null;
            }
            var due = TimeSpan.FromSeconds((double)Math.Max(0, deadline - Stopwatch.GetTimestamp()) / Stopwatch.Frequency);
            if (timer == null) timer = new Timer(_ => DeadlinePassed(), null, due, System.Threading.Timeout.InfiniteTimeSpan);
            else timer.Change(due, System.Threading.Timeout.InfiniteTimeSpan);
        }

        internal void Confirm(Link l, long sent)
        {
            lock (mu) ConfirmLocked(l, sent);
        }

        /// <summary>The statuses a server sends only after the request's commit: they alone move the deadline.</summary>
        internal static bool ConfirmsSession(ushort status)
        {
            switch ((CoordinationStatus)status)
            {
                case CoordinationStatus.Success:
                case CoordinationStatus.NotFound:
                case CoordinationStatus.AlreadyExists:
                case CoordinationStatus.PreconditionFailed:
                case CoordinationStatus.Aborted:
                    return true;
            }
            return false;
        }

        /// <summary>Tests: the deadline's timer runs now, before the deadline, as a timer on its own clock may.</summary>
        internal void DeadlineTimerRanEarlyForTests()
        {
            lock (mu) if (timer != null) timer.Change(System.Threading.Timeout.InfiniteTimeSpan, System.Threading.Timeout.InfiniteTimeSpan);
            DeadlinePassed();
        }

        void DeadlinePassed()
        {
            if (!CheckDeadline()) return;
            // The timer ran before the deadline by the Stopwatch (timers keep
            // their own clock and may fire a little early): run it again for
            // what is left, or the holds would outlive the deadline.
            lock (mu)
            {
                if (ended != null || deadline == 0 || timer == null) return;
                var left = TimeSpan.FromSeconds((double)Math.Max(deadline - Stopwatch.GetTimestamp(), Stopwatch.Frequency / 1000) / Stopwatch.Frequency);
                timer.Change(left, System.Threading.Timeout.InfiniteTimeSpan);
            }
        }

        /// <summary>
        /// Ends the holds when the deadline has passed (checked on the spot,
        /// so a process resumed after a pause sees it before any timer runs);
        /// true while they are still valid.
        /// </summary>
        internal bool CheckDeadline()
        {
            CancellationTokenSource h = null;
            List<SemaphoreLease> gone = null;
            Link l = null;
            Exception why;
            lock (mu)
            {
                if (ended != null) return false;
                if (deadline == 0 || Stopwatch.GetTimestamp() < deadline) return holds != null && !holds.IsCancellationRequested;
                if (holdsReason == null)
                {
                    holdsReason = new DeadlinePassedException("coordination: session " + id + ": the server answered no request sent in the last " +
                        Math.Round((deadline - confirmed) * 1000.0 / Stopwatch.Frequency) + " ms (timeout " + Timeout.TotalMilliseconds +
                        " ms less the allowances): it may expire the session, so its holds are given up");
                    h = holds;
                    gone = new List<SemaphoreLease>(leases.Values);
                    leases.Clear();
                }
                why = holdsReason;
                if (link != null && state == SessionState.Attached && !link.GivenUp)
                {
                    // A late answer on it confirms nothing: the session restores on the next link.
                    link.GivenUp = true;
                    l = link;
                }
            }
            // Each lease learns why before the holds' token (to which its own
            // is linked) fires: a handler woken by its LostToken finds LossReason set.
            if (gone != null) foreach (var le in gone) le.End(why);
            if (h != null) try { h.Cancel(); } catch (ObjectDisposedException) { }
            if (l != null) l.Fail();
            return false;
        }

        /// <summary>The token of the session's holds now (ended: a cancelled token), and why it ended.</summary>
        internal CancellationToken HoldsToken
        {
            get
            {
                CheckDeadline();
                lock (mu) return holds != null && ended == null ? holds.Token : new CancellationToken(true);
            }
        }

        internal SessionState State
        {
            get
            {
                bool valid = CheckDeadline();
                lock (mu)
                {
                    if (state == SessionState.Attached && !valid) return SessionState.Detached; // the restore that follows is under way
                    return state;
                }
            }
        }

        void SetState(SessionState st)
        {
            var fn = onState;
            if (fn != null) states.Push(() => fn(st));
        }

        /// <summary>
        /// Keeps the session confirmed when nothing else has for a third of
        /// its deadline's span: a describe of its node on the session's link.
        /// While none is answered another goes out every twelfth of the span
        /// without waiting, so the one sent last before a held-up link
        /// cleared moves the deadline.
        /// </summary>
        async Task KeepAliveAsync()
        {
            long span = SpanTicks(Timeout);
            long every = Math.Max(span / 3, Stopwatch.Frequency / 1000);
            long lastSent = 0;
            long wake = Stopwatch.GetTimestamp() + every / 2;
            for (;;)
            {
                var wait = TimeSpan.FromSeconds((double)Math.Max(wake - Stopwatch.GetTimestamp(), Stopwatch.Frequency / 1000) / Stopwatch.Frequency);
                try { await Task.Delay(wait, life.Token).ConfigureAwait(false); }
                catch (OperationCanceledException) { return; }
                Link l; long due;
                lock (mu) { l = link; due = confirmed + every; }
                long now = Stopwatch.GetTimestamp();
                long again = lastSent + every / 4;
                if (l != null && now >= due && now >= again)
                {
                    lastSent = now;
                    again = now + every / 4;
                    Attachment.Forget(KeepAliveOnAsync(l, span));
                }
                lock (mu) due = confirmed + every;
                wake = Math.Max(due, again);
            }
        }

        async Task KeepAliveOnAsync(Link l, long span)
        {
            try
            {
                using (var cts = CancellationTokenSource.CreateLinkedTokenSource(life.Token))
                {
                    cts.CancelAfter(TimeSpan.FromSeconds((double)span / Stopwatch.Frequency));
                    var r = await CallOnAsync(l, CoordOp.DescribeNode, new CoordBody { Path = pathBytes }, null, null, cts.Token).ConfigureAwait(false);
                    if (r.LinkLost || r.Status != 0) return;
                    lock (mu)
                    {
                        ConfirmLocked(l, r.Sent);
                        if (r.Body.GraceMs > 0) grace = TimeSpan.FromMilliseconds(r.Body.GraceMs);
                    }
                }
            }
            catch (Exception) { }
        }

        // ---------------- requests ----------------

        /// <summary>Waits until the session is attached and returns its link.</summary>
        async Task<Link> CurrentAsync(CancellationToken ct)
        {
            for (;;)
            {
                Task wake;
                lock (mu)
                {
                    if (ended != null) throw Rethrowable(ended);
                    if (link != null) return link;
                    wake = attached.Task;
                }
                var left = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                using (ct.Register(() => left.TrySetResult(true)))
                    await Task.WhenAny(wake, left.Task).ConfigureAwait(false);
                ct.ThrowIfCancellationRequested();
            }
        }

        static Exception Rethrowable(Exception e)
        {
            if (e is ClosedException) return new ClosedException(e.Message, e);
            if (e is SessionExpiredException) return new SessionExpiredException(e.Message, e) { Status = ((SessionExpiredException)e).Status };
            return new SessionExpiredException(e.Message, e);
        }

        /// <summary>
        /// Sends a request of the session. A safe request is sent again after
        /// a restore when its connection was lost (not a third time when the
        /// server ended two connections with E while it was in flight); an
        /// unsafe one throws IndeterminateException. An answer that follows a
        /// commit moves the deadline; a refusal the server may make without
        /// one does not. before runs before every send.
        /// </summary>
        internal async Task<CoordBody> DoAsync(string what, byte op, CoordBody body, bool safe, Action<Frame> note, Action<Frame> watch, Action before, CancellationToken ct)
        {
            int losses = 0;
            for (;;)
            {
                var l = await CurrentAsync(ct).ConfigureAwait(false);
                if (before != null) before();
                int heard = 0;
                Action<Frame> wrapped = f => { Interlocked.Exchange(ref heard, 1); if (note != null) note(f); };
                var r = await CallOnAsync(l, op, body, wrapped, watch, ct).ConfigureAwait(false);
                if (r.LinkLost)
                {
                    if (r.Sent != 0 && Volatile.Read(ref heard) == 0 && l.Conn.EndedByServer) losses++;
                    var left = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                    using (ct.Register(() => left.TrySetResult(true)))
                    using (life.Token.Register(() => left.TrySetResult(true)))
                        await Task.WhenAny(l.Detached.Task, left.Task).ConfigureAwait(false);
                    ct.ThrowIfCancellationRequested();
                    if (safe && losses < 2) continue;
                    throw new IndeterminateException("coordination: " + what + ": " + (safe
                        ? "the server ended the connection twice with an error while the request was in flight, before it answered: not sent again"
                        : "the connection was lost before the answer; it may or may not have taken effect"));
                }
                if (ConfirmsSession(r.Status)) Confirm(l, r.Sent);
                var err = CoordinationException.FromStatus(what, r.Status, r.Body.Message);
                if (err != null) throw err;
                return r.Body;
            }
        }

        // ---------------- holds ----------------

        /// <summary>Records a granted hold (or the same hold again) and returns its lease.</summary>
        internal SemaphoreLease Granted(CoordinationSession session, string name, ulong orderId, ulong count)
        {
            SemaphoreLease old = null, le;
            Exception fail = null;
            lock (mu)
            {
                if (ended != null) fail = Rethrowable(ended);
                else if (holds == null || holds.IsCancellationRequested || Stopwatch.GetTimestamp() >= deadline)
                    // The deadline passed while the answer was on its way: the
                    // hold exists on the server, but the session cannot vouch for it now.
                    fail = new DeadlinePassedException("coordination: acquire " + name + ": granted, but the session's deadline passed before the answer; acquire again once the session is restored");
                if (fail != null) le = null;
                else if (leases.TryGetValue(name, out old) && old.Token == orderId && !old.LostToken.IsCancellationRequested)
                {
                    old.Count = count; // the same hold, count lowered or kept
                    return old;
                }
                else
                {
                    le = new SemaphoreLease(session, name, orderId, count, holds.Token);
                    leases[name] = le;
                }
            }
            if (fail != null) throw fail;
            if (old != null && old != le) old.End(new LeaseLostException("coordination: " + name + ": replaced by a new hold"));
            return le;
        }

        internal bool HasLease(string name)
        {
            lock (mu) return leases.ContainsKey(name);
        }

        internal void ForgetLease(SemaphoreLease le)
        {
            lock (mu)
            {
                SemaphoreLease cur;
                if (leases.TryGetValue(le.Name, out cur) && cur == le) leases.Remove(le.Name);
            }
        }

        internal void AddWatch(TaskCompletionSource<SemaphoreChange> w) { lock (mu) watches.Add(w); }
        internal void RemoveWatch(TaskCompletionSource<SemaphoreChange> w) { lock (mu) watches.Remove(w); }

        void FireWatchesLocked()
        {
            foreach (var w in watches) w.TrySetResult(new SemaphoreChange(false, false));
            watches.Clear();
        }

        /// <summary>Releases name in the background after an acquire's caller left, ending the session's lease of name first if it has one; the next acquire of name waits for it.</summary>
        internal void Withdraw(Func<Task> release, string name)
        {
            Task prev;
            SemaphoreLease held;
            var done = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            lock (mu)
            {
                withdrawing.TryGetValue(name, out prev);
                withdrawing[name] = done.Task;
                if (leases.TryGetValue(name, out held)) leases.Remove(name);
            }
            // The release gives up the session's whole hold of name: a lease
            // it already had must never look valid for a hold the server may
            // have given to another session.
            if (held != null) held.End(new LeaseLostException("coordination: " + name + ": an acquire of the held semaphore ended before its answer, and its withdrawal releases the hold"));
            Task.Run(async () =>
            {
                try
                {
                    if (prev != null) await prev.ConfigureAwait(false);
                    await release().ConfigureAwait(false);
                }
                catch (Exception) { }
                finally
                {
                    lock (mu)
                    {
                        Task cur;
                        if (withdrawing.TryGetValue(name, out cur) && cur == done.Task) withdrawing.Remove(name);
                    }
                    done.TrySetResult(true);
                }
            });
        }

        internal Task AwaitWithdrawal(string name)
        {
            lock (mu)
            {
                Task t;
                return withdrawing.TryGetValue(name, out t) ? t : Task.FromResult(true);
            }
        }
    }
}
