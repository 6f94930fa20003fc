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
    /// Release by owner (U): when an acquire's connection ended before its
    /// final answer, the grant it may have won is ended on a later connection
    /// by the acquire's owner id, retried across reconnects for as long as the
    /// grant could matter.
    /// </summary>
    internal sealed class OwnerReleaser
    {
        readonly TicketBroker b;

        internal OwnerReleaser(TicketBroker b)
        {
            this.b = b;
        }

        /// <summary>
        /// Ends whatever owner holds or waits for on key (U), retrying across
        /// reconnects until the Stopwatch time until (or ct). Completes for R;
        /// NotHeldException for N; CapacityException for B.
        /// </summary>
        internal async Task ReleaseAsync(string key, byte[] owner, long until, CancellationToken ct)
        {
            string op = "release by owner " + BitConverter.ToString(owner).Replace("-", "").ToLowerInvariant() + " of";
            var left = Arguments.SinceTicks(Stopwatch.GetTimestamp(), until);
            using (var bound = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                bound.CancelAfter(left > TimeSpan.Zero ? left : TimeSpan.Zero);
                var bt = bound.Token;
                var kb = Encoding.UTF8.GetBytes(key);
                for (;;)
                {
                    Connection c;
                    try { c = await b.Connector.GetConnAsync(bt, true).ConfigureAwait(false); }
                    catch (Exception e)
                    {
                        if (e is ClosedException || e is Connector.NoConnectionYet) throw Connector.ConnectError(op, key, e, ct, true);
                        // Refused for now (a persistent refusal): wait for a change.
                        if (!await b.Connector.WaitChangeAsync(bt).ConfigureAwait(false)) throw Connector.ConnectError(op, key, e, ct, true);
                        continue;
                    }
                    var cl = new Call(FrameType.ReleaseOwner, key);
                    StartResult r;
                    try { r = await c.StartAsync(cl, new Frame { Type = FrameType.ReleaseOwner, Owner = owner, Key = kb }, bt).ConfigureAwait(false); }
                    catch (OperationCanceledException e)
                    {
                        throw new UnavailableException(TicketBroker.Op(op, key) + "not sent: no free request slot in time", e);
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
                        if (a == null) throw new IndeterminateException(TicketBroker.Op(op, key) + "no answer in time", null) { Key = key, OwnerBytes = owner };
                    }
                    if (a.Fail != null)
                    {
                        if (a.Fail.Closed || bt.IsCancellationRequested)
                            throw new IndeterminateException(TicketBroker.Op(op, key) + "outcome unknown: " + a.Fail.What(), a.Fail.Cause) { Key = key, OwnerBytes = owner, BrokerClosed = a.Fail.Closed };
                        continue; // U is idempotent: again on the next connection
                    }
                    switch (a.F.Type)
                    {
                        case FrameType.Released:
                            return;
                        case FrameType.NotHeld:
                            throw new NotHeldException(TicketBroker.Op(op, key) + "that owner holds nothing on the key") { Address = c.Addr };
                        case FrameType.Forbidden:
                            throw TicketBroker.Forbidden(TicketBroker.Op(op, key), c.Addr, a.F.Reason, "; not released");
                        default:
                            {
                                var reason = (CapacityReason)a.F.Reason;
                                throw new CapacityException(TicketBroker.Op(op, key) + "rejected by a server capacity limit (" + reason + ")", reason) { Address = c.Addr };
                            }
                    }
                }
            }
        }
    }
}
