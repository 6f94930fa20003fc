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
    /// <summary>
    /// Acquire (A): sends the request under a fresh owner id, waits for the
    /// final answer, and turns it into a Ticket or the exception the caller
    /// must see. Once the request may have been sent, a lost answer is
    /// IndeterminateException, never sent again, except after a stopping
    /// server's E 11: then it is sent again with the same owner and what
    /// remains of its wait on the next connection; a grant that arrives for a
    /// caller who left, or too late for the work budget, is released in the
    /// background.
    /// </summary>
    internal sealed class Acquirer
    {
        readonly TicketBroker b;
        readonly Config Cfg;
        static readonly RandomNumberGenerator Rng = RandomNumberGenerator.Create();

        internal Acquirer(TicketBroker b)
        {
            this.b = b;
            Cfg = b.Cfg;
        }

        /// <summary>The acquire under the operation timeout plus the wait, linked with the caller's token: whichever ends first ends it.</summary>
        internal async Task<Ticket> AcquireAsync(string key, AcquireArgs args, CancellationToken ct)
        {
            var st = new OpState();
            using (var limit = CallBounds.DefaultLimit(Cfg, ct, TimeSpan.FromSeconds(args.Wait)))
            {
                if (limit == null) return await AcquireCoreAsync(key, args, ct, st).ConfigureAwait(false);
                try
                {
                    return await AcquireCoreAsync(key, args, limit.Token, st).ConfigureAwait(false);
                }
                catch (OperationCanceledException e) when (ct.IsCancellationRequested)
                {
                    throw CallBounds.CallersCancellation(e, ct);
                }
                catch (OperationCanceledException e)
                {
                    var within = "within the operation timeout (" + (Cfg.OperationTimeout + TimeSpan.FromSeconds(args.Wait)).TotalSeconds + " s with the wait)";
                    if (!st.Sent)
                        throw CallBounds.NotSentInTime(TicketBroker.Op("acquire", key) + "not sent: it could not be sent " + within + " (" + e.Message + ")", e.InnerException ?? e);
                    throw new IndeterminateException(TicketBroker.Op("acquire", key) + "outcome unknown: no final answer came " + within +
                        "; a cancel was sent and a grant that arrives anyway is released in the background; do not enter the critical section", e)
                    { Key = key, OwnerBytes = st.Owner };
                }
            }
        }

        async Task<Ticket> AcquireCoreAsync(string key, AcquireArgs args, CancellationToken ct, OpState st)
        {
            if (ct.IsCancellationRequested)
                throw new OperationCanceledException(TicketBroker.Op("acquire", key) + "not sent: cancelled before sending", ct);
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
                    wait = (byte)Math.Max(0, Arguments.CeilSeconds(TimeSpan.FromSeconds(args.Wait) - Arguments.SinceTicks(firstSent, Stopwatch.GetTimestamp())));
                try { c = await b.Connector.GetConnAsync(ct, false).ConfigureAwait(false); }
                catch (Exception e) when (interrupted != null) { throw NotSentAgain(interrupted, e); }
                catch (Exception e) { throw Connector.ConnectError("acquire", key, e, ct, false); }
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
                    throw new OperationCanceledException(TicketBroker.Op("acquire", key) +
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
            ((IConnHooks)b).Orphaned(first.Key, first.Owner, first.Sent + first.Span);
            return new IndeterminateException(TicketBroker.Op("acquire", first.Key) + "outcome unknown: the server that had it stopped, and it could not be sent again (" +
                cause.Message + "); once reconnected, the client releases by owner whatever it may have obtained; do not enter the critical section", cause)
            { BrokerClosed = cause is ClosedException, ServerCode = ErrorCode.ShuttingDown, Key = first.Key, OwnerBytes = first.Owner };
        }

        /// <summary>The outcome of the acquire cl, sent with wait; null: a stopping server ended the session first, send it again.</summary>
        async Task<Ticket> AwaitAcquireAsync(Connection c, Call cl, AcquireArgs args, byte wait, CancellationToken ct)
        {
            var limit = TimeSpan.FromSeconds(wait) + CallBounds.AnswerGrace(Cfg, c);
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
                    b.LateGrant(cl.Key, a.F.Token);
                if (a != null && a.Fail != null && a.Fail.ShuttingDown)
                    ((IConnHooks)b).Orphaned(cl.Key, cl.Owner, cl.Sent + cl.Span); // the connection left it to this caller, who leaves too
                throw new OperationCanceledException(TicketBroker.Op("acquire", cl.Key) +
                    "cancelled after the request was sent; a cancel was sent for it and a grant that arrives anyway is released in the background; do not enter the critical section", ct);
            }
            if (a != null) return FinishAcquire(c, cl, a, args);
            throw new IndeterminateException(TicketBroker.Op("acquire", cl.Key) + "outcome unknown, the server " + c.Addr +
                " sent no final answer within the wait plus " + CallBounds.AnswerGrace(Cfg, c).TotalSeconds + " s although the connection is alive; a cancel was sent and a late grant is released in the background; do not enter the critical section", null)
            { Address = c.Addr, Key = cl.Key, OwnerBytes = cl.Owner };
        }

        /// <summary>The outcome of the acquire cl; null: a stopping server ended the session first, send it again.</summary>
        Ticket FinishAcquire(Connection c, Call cl, Answer a, AcquireArgs args)
        {
            string key = cl.Key;
            if (a.Fail != null && a.Fail.ShuttingDown) return null;
            if (a.Fail != null)
            {
                string msg = TicketBroker.Op("acquire", key) + "outcome unknown, " + a.Fail.What() + " after the request was sent; do not enter the critical section";
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
                        if (b.Connector.IsClosed)
                        {
                            // The caller could not release it once the broker is torn down.
                            b.LateGrant(key, f.Token);
                            throw new ClosedException(TicketBroker.Op("acquire", key) + "granted token " + f.Token +
                                " while the broker was closing; the ticket is being released; do not enter the critical section") { Address = c.Addr };
                        }
                        long deadline = Arguments.ConservativeDeadline(cl.Sent, f.LeaseMs, f.QueuedMs);
                        var rem = Arguments.SinceTicks(Stopwatch.GetTimestamp(), deadline);
                        if (rem <= TimeSpan.Zero || rem < args.Budget)
                        {
                            b.LateGrant(key, f.Token);
                            throw new BudgetExceededException(TicketBroker.Op("acquire", key) + "granted token " + f.Token + " with a " + f.LeaseMs +
                                " ms lease after " + f.QueuedMs + " ms in the queue, but only " + Math.Max(0, (long)rem.TotalMilliseconds) +
                                " ms of it conservatively remain, less than the work budget " + args.Budget + "; the ticket is being released; do not enter the critical section", f.Token) { Address = c.Addr };
                        }
                        return new Ticket(b, key, f.Token, deadline, TimeSpan.FromMilliseconds(f.LeaseMs), TimeSpan.FromMilliseconds(f.QueuedMs));
                    }
                case FrameType.NotAcquired:
                    if (args.Wait == 0)
                        throw new NotAcquiredException(TicketBroker.Op("acquire", key) + "not acquired: the key is held or has waiters (one immediate attempt, wait 0)") { Address = c.Addr };
                    throw new NotAcquiredException(TicketBroker.Op("acquire", key) + "not acquired within the wait of " + args.Wait + " s") { Address = c.Addr };
                case FrameType.Cancelled:
                    throw new NotAcquiredException(TicketBroker.Op("acquire", key) + "not acquired: the server cancelled the request") { Address = c.Addr };
                case FrameType.Forbidden:
                    throw TicketBroker.Forbidden(TicketBroker.Op("acquire", key), c.Addr, f.Reason, "; not acquired");
                default: // B
                    {
                        var reason = (CapacityReason)f.Reason;
                        throw new CapacityException(TicketBroker.Op("acquire", key) + "not acquired: the server " + c.Addr + " rejected it for capacity (" + reason +
                            "); this is final and not retried: back off and start a new acquire if still needed", reason) { Address = c.Addr };
                    }
            }
        }
    }
}
