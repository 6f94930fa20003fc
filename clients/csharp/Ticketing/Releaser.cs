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
    /// The release of an exact token (L): sent again across reconnects until
    /// the release's bound (ReleaseBound) from its start, never presumed
    /// successful. Explicit releases, background releases and compensating
    /// releases of late grants all end here.
    /// </summary>
    internal sealed class Releaser
    {
        readonly TicketBroker b;
        readonly Config Cfg;

        internal Releaser(TicketBroker b)
        {
            this.b = b;
            Cfg = b.Cfg;
        }

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
            var left = Cfg.ReleaseBound - Arguments.SinceTicks(start, Stopwatch.GetTimestamp());
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
                        if (ct.IsCancellationRequested) throw new OperationCanceledException(TicketBroker.Op(op, key) + "not sent: cancelled", ct);
                        throw new UnavailableException(TicketBroker.Op(op, key) + "not sent: no connection within " + Cfg.ReleaseBound.TotalSeconds + " s of the call", null);
                    }
                    Connection c;
                    try { c = await b.Connector.GetConnAsync(bt, draining).ConfigureAwait(false); }
                    catch (Exception e)
                    {
                        if (sent > 0) throw Unknown(op, key, lastFail, e);
                        if (e is Connector.NoConnectionYet && ct.IsCancellationRequested)
                            throw new OperationCanceledException(TicketBroker.Op(op, key) + "not sent: " + e.Message + "; cancelled", e, ct);
                        throw Connector.ConnectError(op, key, e, ct, true);
                    }
                    var cl = new Call(FrameType.Release, key);
                    var f = new Frame { Type = FrameType.Release, Token = token, Key = kb };
                    StartResult r;
                    try { r = await c.StartAsync(cl, f, bt).ConfigureAwait(false); }
                    catch (OperationCanceledException e)
                    {
                        if (sent > 0) throw Unknown(op, key, lastFail, e);
                        if (ct.IsCancellationRequested) throw new OperationCanceledException(TicketBroker.Op(op, key) + "not sent: cancelled while waiting for a free request slot", ct);
                        throw new UnavailableException(TicketBroker.Op(op, key) + "not sent: no free request slot on the connection within " + Cfg.ReleaseBound.TotalSeconds + " s of the call", e);
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
                                    throw new NotHeldAfterRetryException(TicketBroker.Op(op, key) + "the server answered that this token does not hold the key; an earlier attempt whose answer was lost may have released it (or it had expired or been released before)") { Address = c.Addr };
                                throw new NotHeldException(TicketBroker.Op(op, key) + "the server answered that this token does not hold the key (it expired or was released before)") { Address = c.Addr };
                            }
                        case FrameType.Forbidden:
                            // final: the same release would be refused again, so it is not retried
                            throw TicketBroker.Forbidden(TicketBroker.Op(op, key), c.Addr, a.F.Reason, "; not released, the ticket stays held");
                        default: // B
                            {
                                var reason = (CapacityReason)a.F.Reason;
                                throw new CapacityException(TicketBroker.Op(op, key) + "not released: rejected by a server capacity limit (" + reason + "); the ticket stays held until its lease expires", reason) { Address = c.Addr };
                            }
                    }
                }
            }
        }

        IndeterminateException Unknown(string op, string key, ConnFailure lastFail, Exception cause)
        {
            string why = lastFail != null ? lastFail.What() + " and no final answer came" : "no final answer came";
            bool closedNow = (lastFail != null && lastFail.Closed) || cause is ClosedException;
            return new IndeterminateException(TicketBroker.Op(op, key) + "outcome unknown: " + why + " within " + Cfg.ReleaseBound.TotalSeconds +
                " s of the call; the ticket may still be held until its lease expires", cause ?? (lastFail != null ? lastFail.Cause : null))
            { BrokerClosed = closedNow, ServerCode = lastFail != null ? lastFail.Code : null };
        }
    }
}
