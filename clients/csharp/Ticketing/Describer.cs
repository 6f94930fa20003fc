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
    /// Describe (D, answered I): reads the state of one key from the leader.
    /// Read-only, so a connection lost before the answer is
    /// UnavailableException and nothing is sent again.
    /// </summary>
    internal sealed class Describer
    {
        readonly TicketBroker b;
        readonly Config Cfg;

        internal Describer(TicketBroker b)
        {
            this.b = b;
            Cfg = b.Cfg;
        }

        internal async Task<KeyDescription> DescribeAsync(string key, CancellationToken ct)
        {
            var st = new OpState();
            using (var limit = CallBounds.DefaultLimit(Cfg, ct, TimeSpan.Zero))
            {
                if (limit == null) return await DescribeCoreAsync(key, ct, st).ConfigureAwait(false);
                try
                {
                    return await DescribeCoreAsync(key, limit.Token, st).ConfigureAwait(false);
                }
                catch (OperationCanceledException e) when (ct.IsCancellationRequested)
                {
                    throw CallBounds.CallersCancellation(e, ct);
                }
                catch (OperationCanceledException e)
                {
                    var msg = TicketBroker.Op("describe", key) + (st.Sent ? "no answer" : "not sent") + " within the operation timeout (" +
                        Cfg.OperationTimeout.TotalSeconds + " s): " + e.Message;
                    throw st.Sent ? new UnavailableException(msg, e.InnerException ?? e) : CallBounds.NotSentInTime(msg, e.InnerException ?? e);
                }
            }
        }

        async Task<KeyDescription> DescribeCoreAsync(string key, CancellationToken ct, OpState st)
        {
            var kb = Encoding.UTF8.GetBytes(key);
            for (;;)
            {
                Connection c;
                try { c = await b.Connector.GetConnAsync(ct, false).ConfigureAwait(false); }
                catch (Exception e) { throw Connector.ConnectError("describe", key, e, ct, false); }
                var cl = new Call(FrameType.Describe, key);
                StartResult r;
                try { r = await c.StartAsync(cl, new Frame { Type = FrameType.Describe, Key = kb }, ct).ConfigureAwait(false); }
                catch (OperationCanceledException)
                {
                    throw new OperationCanceledException(TicketBroker.Op("describe", key) + "not sent: cancelled while waiting for a free request slot", ct);
                }
                if (r == StartResult.Gone) continue;
                st.Sent = true;
                var never = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                // Bounded on a live connection too (docs/protocol.md, Liveness): a
                // server that keeps the connection alive but never answers cannot
                // hold the caller beyond the answer grace, whatever ct says.
                var grace = CallBounds.AnswerGrace(Cfg, c);
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
                    if (a == null && ct.IsCancellationRequested) throw new OperationCanceledException(TicketBroker.Op("describe", key) + "cancelled before the answer", ct);
                    if (a == null)
                        throw new UnavailableException(TicketBroker.Op("describe", key) + "no answer from " + c.Addr + " within " + grace.TotalSeconds + " s although the connection is alive; try again", null) { Address = c.Addr };
                }
                if (a.Fail != null)
                {
                    if (a.Fail.Closed) throw new ClosedException(TicketBroker.Op("describe", key) + "no answer: the broker was closed");
                    throw new UnavailableException(TicketBroker.Op("describe", key) + "no answer: " + a.Fail.What(), a.Fail.Cause) { Address = c.Addr, ServerCode = a.Fail.Code };
                }
                if (a.F.Type == FrameType.Forbidden)
                    throw TicketBroker.Forbidden(TicketBroker.Op("describe", key), c.Addr, a.F.Reason, "");
                if (a.F.Type == FrameType.Capacity)
                {
                    var reason = (CapacityReason)a.F.Reason;
                    throw new CapacityException(TicketBroker.Op("describe", key) + "rejected by a server capacity limit (" + reason + ")", reason) { Address = c.Addr };
                }
                var f = a.F;
                return new KeyDescription(key, (f.Flags & 1) != 0, f.Token, f.Owner,
                    TimeSpan.FromMilliseconds(f.RemainingMs), TimeSpan.FromMilliseconds(f.LeaseMs), (int)f.Count);
            }
        }
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
