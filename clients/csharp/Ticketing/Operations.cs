using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Diagnostics;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing
{
    internal struct AcquireArgs
    {
        internal byte Wait, Lease;
        internal TimeSpan Budget;
    }

    public sealed partial class TicketBroker
    {
        static readonly RandomNumberGenerator Rng = RandomNumberGenerator.Create();

        /// <summary>Rounds a non-negative duration up to whole seconds.</summary>
        internal static long CeilSeconds(TimeSpan d)
        {
            long s = d.Ticks / TimeSpan.TicksPerSecond;
            if (d.Ticks % TimeSpan.TicksPerSecond != 0) s++;
            return s;
        }

        /// <summary>
        /// Throws ArgumentNullException for a null key and ArgumentException
        /// (ParamName "key") for one outside 1..1024 UTF-8 bytes.
        /// </summary>
        internal static void CheckKey(string key, string op)
        {
            if (key == null) throw new ArgumentNullException("key", Op(op, key) + "the key is null; nothing was sent");
            int klen = Encoding.UTF8.GetByteCount(key);
            if (klen == 0 || klen > MaxKeyBytes)
                throw new ArgumentException(Op(op, key) + "the key is " + klen + " bytes, it must be 1.." + MaxKeyBytes + " bytes; nothing was sent", "key");
        }

        static ArgumentOutOfRangeException OutOfRange(string param, object value, string key, string why)
        {
            return new ArgumentOutOfRangeException(param, value, Op("acquire", key) + why + "; nothing was sent");
        }

        internal static AcquireArgs CheckAcquire(string key, TimeSpan wait, TimeSpan lease, TimeSpan budget)
        {
            CheckKey(key, "acquire");
            long maxWait = CeilSeconds(MaxWait), minLease = CeilSeconds(MinLease), maxLease = CeilSeconds(MaxLease);
            long l = CeilSeconds(lease);
            if (wait < TimeSpan.Zero)
                throw OutOfRange("wait", wait, key, "wait " + Secs(wait) + " is negative; it must be 0.." + maxWait + " s (0 is one immediate attempt)");
            if (CeilSeconds(wait) > maxWait)
                throw OutOfRange("wait", wait, key, "wait " + Secs(wait) + " (" + CeilSeconds(wait) + " s rounded up) is longer than the maximum " + maxWait + " s");
            if (lease <= TimeSpan.Zero)
                throw OutOfRange("lease", lease, key, "lease " + Secs(lease) + " must be " + minLease + ".." + maxLease + " s");
            if (l > maxLease)
                throw OutOfRange("lease", lease, key, "lease " + Secs(lease) + " (" + l + " s rounded up) is longer than the maximum " + maxLease + " s");
            if (budget < TimeSpan.Zero)
                throw OutOfRange("budget", budget, key, "work budget " + Secs(budget) + " is negative; it must be 0 or more");
            // Rounded up like wait and lease: a fraction of a second of work is planned as the whole second.
            long bs = CeilSeconds(budget);
            if (bs > maxLease)
                throw OutOfRange("budget", budget, key, "work budget " + Secs(budget) + " is " + bs + " s rounded up, longer than " + maxLease + " s: work longer than the longest lease is not supported");
            // Refused here rather than after a token was spent on a ticket that must be given back.
            TimeSpan most = MaxBudget(l);
            if (TimeSpan.FromSeconds(bs) > most)
                throw OutOfRange("budget", budget, key, "work budget " + Secs(budget) + " (" + bs + " s rounded up) cannot fit in a " + l +
                    " s lease: even a ticket granted at once has at most " + Secs(most) + " of conservative time left (" + ClockDriftPercent +
                    "% clock allowance, " + Secs(ClockDriftMargin) + " margin); use a budget of at most " + (most.Ticks / TimeSpan.TicksPerSecond) + " s or a longer lease");
            return new AcquireArgs { Wait = (byte)CeilSeconds(wait), Lease = (byte)l, Budget = TimeSpan.FromSeconds(bs) };
        }

        /// <summary>
        /// The longest work budget a lease of leaseSeconds whole seconds can
        /// ever satisfy: the conservative remaining time of a grant made at
        /// once, with nothing queued, measured from the send (the deadline's
        /// formula in ticks, not Stopwatch units).
        /// </summary>
        internal static TimeSpan MaxBudget(long leaseSeconds)
        {
            long spanTicks = leaseSeconds * TimeSpan.TicksPerSecond;
            spanTicks -= spanTicks * ClockDriftPercent / 100;
            spanTicks -= ClockDriftMargin.Ticks;
            return TimeSpan.FromTicks(spanTicks);
        }

        /// <summary>A duration in seconds, the unit of the protocol and the docs.</summary>
        static string Secs(TimeSpan d)
        {
            return ((decimal)d.Ticks / TimeSpan.TicksPerSecond).ToString("0.#######", System.Globalization.CultureInfo.InvariantCulture) + " s";
        }

        /// <summary>
        /// The latest moment, on this machine's monotonic clock (Stopwatch
        /// ticks), at which the client may still believe it holds the ticket:
        /// sent + (lease + queued) × (1 − 1 %) − 100 ms. sent precedes the
        /// server's receipt, and the server starts the lease no earlier than
        /// receipt + queued, so its lease ends no earlier than sent + queued +
        /// lease on its clock; the 1 % covers clock rate differences and the
        /// 100 ms millisecond truncation.
        /// </summary>
        internal static long ConservativeDeadline(long sent, uint leaseMs, uint queuedMs)
        {
            long spanTicks = ((long)leaseMs + queuedMs) * TimeSpan.TicksPerMillisecond;
            spanTicks -= spanTicks * ClockDriftPercent / 100;
            spanTicks -= ClockDriftMargin.Ticks;
            return sent + (long)(spanTicks * ((double)Stopwatch.Frequency / TimeSpan.TicksPerSecond));
        }

        internal static TimeSpan SinceTicks(long from, long to)
        {
            return TimeSpan.FromTicks((long)((to - from) * ((double)TimeSpan.TicksPerSecond / Stopwatch.Frequency)));
        }

        /// <summary>
        /// Asks for the ticket of key and waits for the answer. Fractions of a
        /// second are rounded up; values out of range are rejected before
        /// anything is sent (never clamped).
        /// <para>If cancellationToken ends before the request was sent, nothing
        /// is sent (OperationCanceledException). If it ends after the request
        /// may have been sent, the call throws OperationCanceledException at
        /// once and sends a cancel (C) for the acquire; should the server grant
        /// it anyway, the client releases that exact token in the background.
        /// While the connection's in-flight limit is reached, the call waits
        /// for a free slot (having sent nothing).</para>
        /// <para>With or without a token the call ends within the broker's
        /// operation timeout (TicketBrokerBuilder.OperationTimeout, default
        /// 10 s) plus wait, or sooner when the token ends, as
        /// HttpClient.Timeout does: UnavailableException if nothing was sent,
        /// IndeterminateException if the acquire may have been sent (cancelled
        /// and a late grant released as above).</para>
        /// </summary>
        /// <param name="key">The key, 1..1024 UTF-8 bytes.</param>
        /// <param name="wait">0..255 s: how long the server keeps the request in the key's FIFO queue; zero is one immediate attempt, never queued.</param>
        /// <param name="lease">1..250 s: how long the ticket is held unless released.</param>
        /// <param name="budget">Required, at most lease × 0.99 − 0.1 s (what even an immediate grant leaves; rounded up to whole seconds): the minimum time the caller needs for its work; a ticket is handed over only if its conservative remaining time is positive and at least budget, otherwise it is released and BudgetExceededException thrown.</param>
        /// <param name="cancellationToken">Ends the call sooner than the operation timeout (see above).</param>
        /// <returns>The granted ticket; release it (ReleaseAsync, await using / DisposeAsync, or Dispose).</returns>
        /// <exception cref="ArgumentNullException">key is null (thrown by the call itself).</exception>
        /// <exception cref="ArgumentException">key is empty or over 1024 bytes (thrown by the call itself).</exception>
        /// <exception cref="ArgumentOutOfRangeException">wait, lease or budget is out of range (thrown by the call itself).</exception>
        /// <exception cref="NotAcquiredException">Not granted within the wait, or withdrawn by the server.</exception>
        /// <exception cref="CapacityException">A server limit; final, not retried.</exception>
        /// <exception cref="IndeterminateException">The request may have been sent but its final answer was lost: do not enter the critical section; it is never re-sent automatically, except after a stopping server's E 11 (shutting down), which sends it again with the same owner and what remains of its wait on the next connection.</exception>
        /// <exception cref="BudgetExceededException">Granted too late for the budget; it is being released.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="PermissionDeniedException">The server refused the request for this client's principal.</exception>
        /// <exception cref="UnavailableException">Nothing could be sent in time (no connection).</exception>
        /// <exception cref="ClosedException">The broker was closed before the request was sent, or the grant came while it closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task<Ticket> AcquireAsync(string key, TimeSpan wait, TimeSpan lease, TimeSpan budget,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var args = CheckAcquire(key, wait, lease, budget);
            return AcquireBoundedAsync(key, args, cancellationToken);
        }

        /// <summary>The acquire under the operation timeout plus the wait, linked with the caller's token: whichever ends first ends it.</summary>
        async Task<Ticket> AcquireBoundedAsync(string key, AcquireArgs args, CancellationToken ct)
        {
            var st = new OpState();
            using (var limit = DefaultLimit(ct, TimeSpan.FromSeconds(args.Wait)))
            {
                if (limit == null) return await AcquireCoreAsync(key, args, ct, st).ConfigureAwait(false);
                try
                {
                    return await AcquireCoreAsync(key, args, limit.Token, st).ConfigureAwait(false);
                }
                catch (OperationCanceledException e) when (ct.IsCancellationRequested)
                {
                    throw CallersCancellation(e, ct);
                }
                catch (OperationCanceledException e)
                {
                    var within = "within the operation timeout (" + (Cfg.OperationTimeout + TimeSpan.FromSeconds(args.Wait)).TotalSeconds + " s with the wait)";
                    if (!st.Sent)
                        throw NotSentInTime(Op("acquire", key) + "not sent: it could not be sent " + within + " (" + e.Message + ")", e.InnerException ?? e);
                    throw new IndeterminateException(Op("acquire", key) + "outcome unknown: no final answer came " + within +
                        "; a cancel was sent and a grant that arrives anyway is released in the background; do not enter the critical section", e)
                    { Key = key, OwnerBytes = st.Owner };
                }
            }
        }

        /// <summary>
        /// A call not sent within the operation timeout: WrongClusterException
        /// when the servers that answered belong to another cluster than the
        /// pinned one, UnavailableException otherwise.
        /// </summary>
        static UnavailableException NotSentInTime(string msg, Exception cause)
        {
            if (cause is WrongClusterException) return new WrongClusterException(msg, cause);
            return new UnavailableException(msg, cause);
        }

        /// <summary>
        /// When the caller passed no cancellable token, a source that ends the
        /// call after the broker's operation timeout plus extra (an acquire's
        /// wait); with a token, the same source linked with it, so that the
        /// token ends the call sooner, never later (as HttpClient.Timeout with
        /// a request's token); null when the timeout is infinite, and the
        /// caller's token alone governs.
        /// </summary>
        internal CancellationTokenSource DefaultLimit(CancellationToken ct, TimeSpan extra)
        {
            if (Cfg.OperationTimeout == Timeout.InfiniteTimeSpan) return null;
            var cts = CancellationTokenSource.CreateLinkedTokenSource(ct);
            cts.CancelAfter(Cfg.OperationTimeout + extra);
            return cts;
        }

        /// <summary>The caller's own cancellation, reported with the caller's token (not the linked one the call ran under).</summary>
        static OperationCanceledException CallersCancellation(OperationCanceledException e, CancellationToken ct)
        {
            return new OperationCanceledException(e.Message, e.InnerException ?? e, ct);
        }

        async Task<Ticket> AcquireCoreAsync(string key, AcquireArgs args, CancellationToken ct, OpState st)
        {
            if (ct.IsCancellationRequested)
                throw new OperationCanceledException(Op("acquire", key) + "not sent: cancelled before sending", ct);
            var owner = new byte[16];
            lock (Rng) Rng.GetBytes(owner);
            st.Owner = owner;
            var kb = Encoding.UTF8.GetBytes(key);
            // interrupted: the first send's call once a stopping server ended
            // its session (E 11); the acquire is then sent again, with the same
            // owner and what remains of its wait, on the next connection.
            Call interrupted = null;
            long firstSent = 0;
            for (;;)
            {
                Connection c;
                byte wait = args.Wait;
                if (interrupted != null)
                    wait = (byte)Math.Max(0, CeilSeconds(TimeSpan.FromSeconds(args.Wait) - SinceTicks(firstSent, Stopwatch.GetTimestamp())));
                try { c = await GetConnAsync(ct, false).ConfigureAwait(false); }
                catch (Exception e) when (interrupted != null) { throw NotSentAgain(interrupted, e); }
                catch (Exception e) { throw ConnectError("acquire", key, e, ct, false); }
                // Span: how long a grant of it can matter; a release by owner after a
                // lost answer is pointless once the lease would have run out (leader
                // changes restart leases, hence the second lease).
                var cl = new Call(FrameType.Acquire, key)
                {
                    Owner = owner,
                    Span = (long)((args.Wait + 2.0 * args.Lease) * Stopwatch.Frequency),
                };
                var f = new Frame { Type = FrameType.Acquire, Owner = owner, Wait = wait, Lease = args.Lease, Key = kb };
                StartResult r;
                try { r = await c.StartAsync(cl, f, ct).ConfigureAwait(false); }
                catch (OperationCanceledException e) when (interrupted != null) { throw NotSentAgain(interrupted, e); }
                catch (OperationCanceledException)
                {
                    throw new OperationCanceledException(Op("acquire", key) +
                        "not sent: cancelled while waiting for a free request slot (the connection's in-flight limit was reached)", ct);
                }
                if (r == StartResult.Gone) continue; // nothing was sent: try the next connection
                st.Sent = true;
                if (interrupted == null) firstSent = cl.Sent;
                var t = await AwaitAcquireAsync(c, cl, args, wait, ct).ConfigureAwait(false);
                if (t != null) return t;
                interrupted = cl;
            }
        }

        /// <summary>
        /// An acquire a stopping server interrupted that could not be sent
        /// again: indeterminate, and its owner is released like that of any
        /// acquire whose answer was lost.
        /// </summary>
        IndeterminateException NotSentAgain(Call first, Exception cause)
        {
            ((IConnHooks)this).Orphaned(first.Key, first.Owner, first.Sent + first.Span);
            return new IndeterminateException(Op("acquire", first.Key) + "outcome unknown: the server that had it stopped, and it could not be sent again (" +
                cause.Message + "); once reconnected, the client releases by owner whatever it may have obtained; do not enter the critical section", cause)
            { BrokerClosed = cause is ClosedException, ServerCode = ErrorCode.ShuttingDown, Key = first.Key, OwnerBytes = first.Owner };
        }

        /// <summary>How long past the wait an acquire waits for its final answer before giving up on it as indeterminate.</summary>
        TimeSpan AnswerGrace(Connection c)
        {
            if (Cfg.AnswerGraceOverride > TimeSpan.Zero) return Cfg.AnswerGraceOverride;
            return c.Silence > Cfg.MinAnswerGrace ? c.Silence : Cfg.MinAnswerGrace;
        }

        /// <summary>The outcome of the acquire cl, sent with wait; null: a stopping server ended the session first, send it again.</summary>
        async Task<Ticket> AwaitAcquireAsync(Connection c, Call cl, AcquireArgs args, byte wait, CancellationToken ct)
        {
            var limit = TimeSpan.FromSeconds(wait) + AnswerGrace(c);
            using (var timer = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                var expired = Task.Delay(limit, timer.Token);
                var done = await Task.WhenAny(cl.Res.Task, expired).ConfigureAwait(false);
                timer.Cancel();
                if (done == cl.Res.Task) return FinishAcquire(c, cl, cl.Res.Task.Result, args);
            }
            var a = c.Abandon(cl);
            if (ct.IsCancellationRequested)
            {
                if (a != null && a.Fail == null && a.F.Type != FrameType.Granted)
                    return FinishAcquire(c, cl, a, args); // W, X or B arrived first
                if (a != null && a.Fail == null && a.F.Type == FrameType.Granted)
                    LateGrant(cl.Key, a.F.Token);
                if (a != null && a.Fail != null && a.Fail.ShuttingDown)
                    ((IConnHooks)this).Orphaned(cl.Key, cl.Owner, cl.Sent + cl.Span); // the connection left it to this caller, who leaves too
                throw new OperationCanceledException(Op("acquire", cl.Key) +
                    "cancelled after the request was sent; a cancel was sent for it and a grant that arrives anyway is released in the background; do not enter the critical section", ct);
            }
            if (a != null) return FinishAcquire(c, cl, a, args);
            throw new IndeterminateException(Op("acquire", cl.Key) + "outcome unknown, the server " + c.Addr +
                " sent no final answer within the wait plus " + AnswerGrace(c).TotalSeconds + " s although the connection is alive; a cancel was sent and a late grant is released in the background; do not enter the critical section", null)
            { Address = c.Addr, Key = cl.Key, OwnerBytes = cl.Owner };
        }

        /// <summary>The outcome of the acquire cl; null: a stopping server ended the session first, send it again.</summary>
        Ticket FinishAcquire(Connection c, Call cl, Answer a, AcquireArgs args)
        {
            string key = cl.Key;
            if (a.Fail != null && a.Fail.ShuttingDown) return null;
            if (a.Fail != null)
            {
                string msg = Op("acquire", key) + "outcome unknown, " + a.Fail.What() + " after the request was sent; do not enter the critical section";
                if (a.Fail.Closed)
                    msg += "; a cancel was sent, and a grant that arrives before the connection closes is released";
                else
                    msg += "; once reconnected, the client asks the leader to end whatever this acquire's owner holds or waits for on the key (release by owner)";
                throw new IndeterminateException(msg, a.Fail.Cause)
                { Address = c.Addr, BrokerClosed = a.Fail.Closed, ServerCode = a.Fail.Code, Key = key, OwnerBytes = cl.Owner };
            }
            var f = a.F;
            switch (f.Type)
            {
                case FrameType.Granted:
                    {
                        if (IsClosed)
                        {
                            // The caller could not release it once the broker is torn down.
                            LateGrant(key, f.Token);
                            throw new ClosedException(Op("acquire", key) + "granted token " + f.Token +
                                " while the broker was closing; the ticket is being released; do not enter the critical section") { Address = c.Addr };
                        }
                        long deadline = ConservativeDeadline(cl.Sent, f.LeaseMs, f.QueuedMs);
                        var rem = SinceTicks(Stopwatch.GetTimestamp(), deadline);
                        if (rem <= TimeSpan.Zero || rem < args.Budget)
                        {
                            LateGrant(key, f.Token);
                            throw new BudgetExceededException(Op("acquire", key) + "granted token " + f.Token + " with a " + f.LeaseMs +
                                " ms lease after " + f.QueuedMs + " ms in the queue, but only " + Math.Max(0, (long)rem.TotalMilliseconds) +
                                " ms of it conservatively remain, less than the work budget " + args.Budget + "; the ticket is being released; do not enter the critical section", f.Token) { Address = c.Addr };
                        }
                        return new Ticket(this, key, f.Token, deadline, TimeSpan.FromMilliseconds(f.LeaseMs), TimeSpan.FromMilliseconds(f.QueuedMs));
                    }
                case FrameType.NotAcquired:
                    if (args.Wait == 0)
                        throw new NotAcquiredException(Op("acquire", key) + "not acquired: the key is held or has waiters (one immediate attempt, wait 0)") { Address = c.Addr };
                    throw new NotAcquiredException(Op("acquire", key) + "not acquired within the wait of " + args.Wait + " s") { Address = c.Addr };
                case FrameType.Cancelled:
                    throw new NotAcquiredException(Op("acquire", key) + "not acquired: the server cancelled the request") { Address = c.Addr };
                case FrameType.Forbidden:
                    throw Forbidden(Op("acquire", key), c.Addr, f.Reason, "; not acquired");
                default: // B
                    {
                        var reason = (CapacityReason)f.Reason;
                        throw new CapacityException(Op("acquire", key) + "not acquired: the server " + c.Addr + " rejected it for capacity (" + reason +
                            "); this is final and not retried: back off and start a new acquire if still needed", reason) { Address = c.Addr };
                    }
            }
        }

        // ---------------- releasing ----------------

        /// <summary>
        /// Releases key's exact token, retrying across reconnects until the
        /// absolute bound start + ReleaseBound (or ct) ends. R: success; N:
        /// NotHeldException (NotHeldAfterRetryException when N answered a resent
        /// release); B: CapacityException; no final answer in time: an
        /// exception (IndeterminateException if a release may have been sent,
        /// UnavailableException if none could be), never success.
        /// </summary>
        internal async Task ReleaseAsync(string key, ulong token, long start, bool draining, OpState st, CancellationToken ct)
        {
            string op = "release of token " + token + " for";
            var left = Cfg.ReleaseBound - SinceTicks(start, Stopwatch.GetTimestamp());
            using (var bound = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                bound.CancelAfter(left > TimeSpan.Zero ? left : TimeSpan.Zero);
                var bt = bound.Token;
                int sent = 0;
                ConnFailure lastFail = null;
                var kb = Encoding.UTF8.GetBytes(key);
                for (;;)
                {
                    if (bt.IsCancellationRequested)
                    {
                        if (sent > 0) throw Unknown(op, key, lastFail, null);
                        if (ct.IsCancellationRequested) throw new OperationCanceledException(Op(op, key) + "not sent: cancelled", ct);
                        throw new UnavailableException(Op(op, key) + "not sent: no connection within " + Cfg.ReleaseBound.TotalSeconds + " s of the call", null);
                    }
                    Connection c;
                    try { c = await GetConnAsync(bt, draining).ConfigureAwait(false); }
                    catch (Exception e)
                    {
                        if (sent > 0) throw Unknown(op, key, lastFail, e);
                        if (e is NoConnectionYet && ct.IsCancellationRequested)
                            throw new OperationCanceledException(Op(op, key) + "not sent: " + e.Message + "; cancelled", e, ct);
                        throw ConnectError(op, key, e, ct, true);
                    }
                    var cl = new Call(FrameType.Release, key);
                    var f = new Frame { Type = FrameType.Release, Token = token, Key = kb };
                    StartResult r;
                    try { r = await c.StartAsync(cl, f, bt).ConfigureAwait(false); }
                    catch (OperationCanceledException e)
                    {
                        if (sent > 0) throw Unknown(op, key, lastFail, e);
                        if (ct.IsCancellationRequested) throw new OperationCanceledException(Op(op, key) + "not sent: cancelled while waiting for a free request slot", ct);
                        throw new UnavailableException(Op(op, key) + "not sent: no free request slot on the connection within " + Cfg.ReleaseBound.TotalSeconds + " s of the call", e);
                    }
                    if (r == StartResult.Gone) continue;
                    sent++;
                    if (st != null) st.Sent = true;
                    Answer a;
                    var never = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                    using (bt.Register(() => never.TrySetResult(true)))
                    {
                        await Task.WhenAny(cl.Res.Task, never.Task).ConfigureAwait(false);
                    }
                    if (cl.Res.Task.IsCompleted) a = cl.Res.Task.Result;
                    else
                    {
                        a = c.Abandon(cl);
                        if (a == null) throw Unknown(op, key, lastFail, null);
                    }
                    if (a.Fail != null)
                    {
                        lastFail = a.Fail;
                        if (a.Fail.Closed || bt.IsCancellationRequested) throw Unknown(op, key, lastFail, a.Fail.Cause);
                        continue; // the exact token again, on the next connection
                    }
                    switch (a.F.Type)
                    {
                        case FrameType.Released:
                            return;
                        case FrameType.NotHeld:
                            {
                                // N may answer our own earlier attempt: a distinct
                                // subclass, so callers can tell (docs/protocol.md).
                                if (sent > 1)
                                    throw new NotHeldAfterRetryException(Op(op, key) + "the server answered that this token does not hold the key; an earlier attempt whose answer was lost may have released it (or it had expired or been released before)") { Address = c.Addr };
                                throw new NotHeldException(Op(op, key) + "the server answered that this token does not hold the key (it expired or was released before)") { Address = c.Addr };
                            }
                        case FrameType.Forbidden:
                            // final: the same release would be refused again, so it is not retried
                            throw Forbidden(Op(op, key), c.Addr, a.F.Reason, "; not released, the ticket stays held");
                        default: // B
                            {
                                var reason = (CapacityReason)a.F.Reason;
                                throw new CapacityException(Op(op, key) + "not released: rejected by a server capacity limit (" + reason + "); the ticket stays held until its lease expires", reason) { Address = c.Addr };
                            }
                    }
                }
            }
        }

        IndeterminateException Unknown(string op, string key, ConnFailure lastFail, Exception cause)
        {
            string why = lastFail != null ? lastFail.What() + " and no final answer came" : "no final answer came";
            bool closedNow = (lastFail != null && lastFail.Closed) || cause is ClosedException;
            return new IndeterminateException(Op(op, key) + "outcome unknown: " + why + " within " + Cfg.ReleaseBound.TotalSeconds +
                " s of the call; the ticket may still be held until its lease expires", cause ?? (lastFail != null ? lastFail.Cause : null))
            { BrokerClosed = closedNow, ServerCode = lastFail != null ? lastFail.Code : null };
        }

        /// <summary>
        /// Releases key's ticket if token still holds it, for a ticket known
        /// only by its key and token (acquired by another process, or whose
        /// token was persisted). Within ReleaseBound (5 s from this call, also
        /// without a token) it retries the exact token across reconnects; a
        /// release is never presumed successful.
        /// </summary>
        /// <param name="key">The key, 1..1024 UTF-8 bytes.</param>
        /// <param name="token">The ticket's token (never 0).</param>
        /// <param name="cancellationToken">Ends the call early.</param>
        /// <returns>A task that completes when the server answered R (the hold ended).</returns>
        /// <exception cref="ArgumentNullException">key is null (thrown by the call itself).</exception>
        /// <exception cref="ArgumentException">key is empty or over 1024 bytes (thrown by the call itself).</exception>
        /// <exception cref="ArgumentOutOfRangeException">token is 0 (thrown by the call itself).</exception>
        /// <exception cref="NotHeldException">N: the ticket had already expired or been released, or the key is held under another token (NotHeldAfterRetryException when N answered a release sent again).</exception>
        /// <exception cref="CapacityException">A server capacity limit rejected it.</exception>
        /// <exception cref="PermissionDeniedException">The server refused it for this client's principal.</exception>
        /// <exception cref="IndeterminateException">A release may have been sent but no final answer came within the bound.</exception>
        /// <exception cref="UnavailableException">None could be sent within the bound.</exception>
        /// <exception cref="ClosedException">The broker was closed before it was sent.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task ReleaseTokenAsync(string key, ulong token, CancellationToken cancellationToken = default(CancellationToken))
        {
            string op = "release of token " + token + " for";
            CheckKey(key, op);
            if (token == 0)
                throw new ArgumentOutOfRangeException("token", token, Op(op, key) + "token 0 is never granted (tokens start at 1); nothing was sent");
            return ReleaseAsync(key, token, Stopwatch.GetTimestamp(), false, null, cancellationToken);
        }

        // ---------------- describing ----------------

        /// <summary>
        /// Reads the state of key (D/I). Read-only and never retried
        /// automatically. The call ends within the operation timeout, or sooner
        /// when the token ends; on a live connection that does not answer, within the
        /// answer grace (10 s, or 3 ping intervals if longer) in any case.
        /// </summary>
        /// <param name="key">The key, 1..1024 UTF-8 bytes.</param>
        /// <param name="cancellationToken">Ends the call sooner than the operation timeout.</param>
        /// <returns>The key's state as the leader saw it when it answered.</returns>
        /// <exception cref="ArgumentNullException">key is null (thrown by the call itself).</exception>
        /// <exception cref="ArgumentException">key is empty or over 1024 bytes (thrown by the call itself).</exception>
        /// <exception cref="UnavailableException">No connection in time, the connection was lost before the answer, or no answer within the grace.</exception>
        /// <exception cref="PermissionDeniedException">The server refused it for this client's principal.</exception>
        /// <exception cref="CapacityException">A server capacity limit rejected it.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="ClosedException">The broker was closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task<KeyDescription> DescribeAsync(string key, CancellationToken cancellationToken = default(CancellationToken))
        {
            CheckKey(key, "describe");
            return DescribeBoundedAsync(key, cancellationToken);
        }

        async Task<KeyDescription> DescribeBoundedAsync(string key, CancellationToken ct)
        {
            var st = new OpState();
            using (var limit = DefaultLimit(ct, TimeSpan.Zero))
            {
                if (limit == null) return await DescribeCoreAsync(key, ct, st).ConfigureAwait(false);
                try
                {
                    return await DescribeCoreAsync(key, limit.Token, st).ConfigureAwait(false);
                }
                catch (OperationCanceledException e) when (ct.IsCancellationRequested)
                {
                    throw CallersCancellation(e, ct);
                }
                catch (OperationCanceledException e)
                {
                    var msg = Op("describe", key) + (st.Sent ? "no answer" : "not sent") + " within the operation timeout (" +
                        Cfg.OperationTimeout.TotalSeconds + " s): " + e.Message;
                    throw st.Sent ? new UnavailableException(msg, e.InnerException ?? e) : NotSentInTime(msg, e.InnerException ?? e);
                }
            }
        }

        async Task<KeyDescription> DescribeCoreAsync(string key, CancellationToken ct, OpState st)
        {
            var kb = Encoding.UTF8.GetBytes(key);
            for (;;)
            {
                Connection c;
                try { c = await GetConnAsync(ct, false).ConfigureAwait(false); }
                catch (Exception e) { throw ConnectError("describe", key, e, ct, false); }
                var cl = new Call(FrameType.Describe, key);
                StartResult r;
                try { r = await c.StartAsync(cl, new Frame { Type = FrameType.Describe, Key = kb }, ct).ConfigureAwait(false); }
                catch (OperationCanceledException)
                {
                    throw new OperationCanceledException(Op("describe", key) + "not sent: cancelled while waiting for a free request slot", ct);
                }
                if (r == StartResult.Gone) continue;
                st.Sent = true;
                var never = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                // Bounded on a live connection too (docs/protocol.md, Liveness): a
                // server that keeps the connection alive but never answers cannot
                // hold the caller beyond the answer grace, whatever ct says.
                var grace = AnswerGrace(c);
                using (var stopTimer = new CancellationTokenSource())
                using (ct.Register(() => never.TrySetResult(true)))
                {
                    await Task.WhenAny(cl.Res.Task, never.Task, Task.Delay(grace, stopTimer.Token)).ConfigureAwait(false);
                    stopTimer.Cancel(); // no timer left behind per describe
                }
                Answer a;
                if (cl.Res.Task.IsCompleted) a = cl.Res.Task.Result;
                else
                {
                    a = c.Abandon(cl);
                    if (a == null && ct.IsCancellationRequested) throw new OperationCanceledException(Op("describe", key) + "cancelled before the answer", ct);
                    if (a == null)
                        throw new UnavailableException(Op("describe", key) + "no answer from " + c.Addr + " within " + grace.TotalSeconds + " s although the connection is alive; try again", null) { Address = c.Addr };
                }
                if (a.Fail != null)
                {
                    if (a.Fail.Closed) throw new ClosedException(Op("describe", key) + "no answer: the broker was closed");
                    throw new UnavailableException(Op("describe", key) + "no answer: " + a.Fail.What(), a.Fail.Cause) { Address = c.Addr, ServerCode = a.Fail.Code };
                }
                if (a.F.Type == FrameType.Forbidden)
                    throw Forbidden(Op("describe", key), c.Addr, a.F.Reason, "");
                if (a.F.Type == FrameType.Capacity)
                {
                    var reason = (CapacityReason)a.F.Reason;
                    throw new CapacityException(Op("describe", key) + "rejected by a server capacity limit (" + reason + ")", reason) { Address = c.Addr };
                }
                var f = a.F;
                return new KeyDescription(key, (f.Flags & 1) != 0, f.Token, f.Owner,
                    TimeSpan.FromMilliseconds(f.RemainingMs), TimeSpan.FromMilliseconds(f.LeaseMs), (int)f.Count);
            }
        }

        /// <summary>
        /// Ends whatever owner holds or waits for on key (U), retrying across
        /// reconnects until the Stopwatch time until (or ct). Completes for R;
        /// NotHeldException for N; CapacityException for B.
        /// </summary>
        internal async Task ReleaseOwnerAsync(string key, byte[] owner, long until, CancellationToken ct)
        {
            string op = "release by owner " + BitConverter.ToString(owner).Replace("-", "").ToLowerInvariant() + " of";
            var left = SinceTicks(Stopwatch.GetTimestamp(), until);
            using (var bound = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                bound.CancelAfter(left > TimeSpan.Zero ? left : TimeSpan.Zero);
                var bt = bound.Token;
                var kb = Encoding.UTF8.GetBytes(key);
                for (;;)
                {
                    Connection c;
                    try { c = await GetConnAsync(bt, true).ConfigureAwait(false); }
                    catch (Exception e)
                    {
                        if (e is ClosedException || e is NoConnectionYet) throw ConnectError(op, key, e, ct, true);
                        // Refused for now (a persistent refusal): wait for a change.
                        if (!await WaitChangeAsync(bt).ConfigureAwait(false)) throw ConnectError(op, key, e, ct, true);
                        continue;
                    }
                    var cl = new Call(FrameType.ReleaseOwner, key);
                    StartResult r;
                    try { r = await c.StartAsync(cl, new Frame { Type = FrameType.ReleaseOwner, Owner = owner, Key = kb }, bt).ConfigureAwait(false); }
                    catch (OperationCanceledException e)
                    {
                        throw new UnavailableException(Op(op, key) + "not sent: no free request slot in time", e);
                    }
                    if (r == StartResult.Gone) continue;
                    var never = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                    using (bt.Register(() => never.TrySetResult(true)))
                    {
                        await Task.WhenAny(cl.Res.Task, never.Task).ConfigureAwait(false);
                    }
                    Answer a;
                    if (cl.Res.Task.IsCompleted) a = cl.Res.Task.Result;
                    else
                    {
                        a = c.Abandon(cl);
                        if (a == null) throw new IndeterminateException(Op(op, key) + "no answer in time", null) { Key = key, OwnerBytes = owner };
                    }
                    if (a.Fail != null)
                    {
                        if (a.Fail.Closed || bt.IsCancellationRequested)
                            throw new IndeterminateException(Op(op, key) + "outcome unknown: " + a.Fail.What(), a.Fail.Cause) { Key = key, OwnerBytes = owner, BrokerClosed = a.Fail.Closed };
                        continue; // U is idempotent: again on the next connection
                    }
                    switch (a.F.Type)
                    {
                        case FrameType.Released:
                            return;
                        case FrameType.NotHeld:
                            throw new NotHeldException(Op(op, key) + "that owner holds nothing on the key") { Address = c.Addr };
                        case FrameType.Forbidden:
                            throw Forbidden(Op(op, key), c.Addr, a.F.Reason, "; not released");
                        default:
                            {
                                var reason = (CapacityReason)a.F.Reason;
                                throw new CapacityException(Op(op, key) + "rejected by a server capacity limit (" + reason + ")", reason) { Address = c.Addr };
                            }
                    }
                }
            }
        }

        /// <summary>The exception of a request answered F: final, nothing happened, the connection stays open.</summary>
        static PermissionDeniedException Forbidden(string op, string addr, byte reason, string effect)
        {
            var r = (PermissionReason)reason;
            return new PermissionDeniedException(op + "permission denied by the server " + addr + ": " + PermissionDeniedException.ReasonName(r) + effect +
                "; the same request is refused until the server's principals change (docs/deployment.md, Authorization)", r) { Address = addr };
        }

        internal void EnqueueTicketRelease(Ticket t)
        {
            rel.Enqueue(new RelJob { Key = t.Key, Token = t.Token, At = Stopwatch.GetTimestamp(), Ticket = t });
        }
    }

    /// <summary>What an operation got to do before it ended: whether its request may have been sent, and an acquire's owner.</summary>
    internal sealed class OpState
    {
        internal bool Sent;
        internal byte[] Owner;
    }

    /// <summary>The state of one key as the leader saw it when it answered.</summary>
    public sealed class KeyDescription
    {
        /// <summary>The key described.</summary>
        public string Key { get; private set; }
        /// <summary>Whether a ticket holds the key.</summary>
        public bool Held { get; private set; }
        /// <summary>The holder's token (0 when free).</summary>
        public ulong Token { get; private set; }
        /// <summary>The holder's acquire owner (16 bytes; zero when free).</summary>
        public IReadOnlyList<byte> Owner { get; private set; }
        /// <summary>The holder's remaining lease as the leader sees it.</summary>
        public TimeSpan Remaining { get; private set; }
        /// <summary>The holder's granted lease (zero when free).</summary>
        public TimeSpan Lease { get; private set; }
        /// <summary>Acquires waiting in the key's queue.</summary>
        public int Waiters { get; private set; }

        internal KeyDescription(string key, bool held, ulong token, byte[] owner, TimeSpan remaining, TimeSpan lease, int waiters)
        {
            Key = key; Held = held; Token = token; Owner = new ReadOnlyCollection<byte>((byte[])owner.Clone()); Remaining = remaining; Lease = lease; Waiters = waiters;
        }
    }
}
