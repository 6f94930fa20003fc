using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing
{
    /// <summary>What a coordination request on one connection came to.</summary>
    internal sealed class CoordResult
    {
        /// <summary>The final T (or B) frame; null when the request was not answered.</summary>
        internal Frame F;
        /// <summary>Nothing was sent: the connection ended (or was gone) first.</summary>
        internal bool NotSent;
        /// <summary>The request may have been sent, but the connection ended (or the caller's stop fired) before its answer.</summary>
        internal bool Lost;
        /// <summary>Stopwatch ticks read before the request's bytes were handed to the writer (0 if not sent).</summary>
        internal long Sent;
    }

    // Coordination requests (K) and answers (T) on the connection: the
    // answers go through the pending table like every other answer; the
    // notifications (id 0 to the subscribed sessions, a watch's Changed, an
    // acquire's Queued) are handed to callbacks that only queue work: the
    // reader never runs caller code.
    internal sealed partial class Connection
    {
        /// <summary>A request with more data than this takes the connection's one large slot.</summary>
        internal const int LargeRequest = 64 << 10;

        /// <summary>Y set ReadySessions: the server carries many coordination sessions on this connection.</summary>
        internal bool Sessions;

        // From the first coordination request on, answers may be longer than
        // a ticket frame (a semaphore's data, up to 1 MiB).
        volatile bool coordReplies;
        readonly Dictionary<uint, Action<Frame>> watches = new Dictionary<uint, Action<Frame>>();
        // One large request at a time on its way: a keep-alive queued behind
        // it waits for at most one large request's bytes.
        readonly SemaphoreSlim largeSlot = new SemaphoreSlim(1);
        int largeHeld;            // requests holding the large slot now (tests: never above 1)
        internal int LargeHeldMax; // tests: the most that held it at once
        readonly object subsMu = new object();
        readonly List<Action<Frame>> coordSubs = new List<Action<Frame>>();

        /// <summary>Calls fn (which must not block) for every notification with id 0 until the returned handle is disposed.</summary>
        internal IDisposable SubscribeCoord(Action<Frame> fn)
        {
            lock (subsMu) coordSubs.Add(fn);
            return new Unsubscriber(() => { lock (subsMu) coordSubs.Remove(fn); });
        }

        sealed class Unsubscriber : IDisposable
        {
            Action undo;
            internal Unsubscriber(Action undo) { this.undo = undo; }
            public void Dispose() { var u = Interlocked.Exchange(ref undo, null); if (u != null) u(); }
        }

        /// <summary>
        /// Handles a T that is not a request's final answer; true when f was
        /// handled (fl, if set, ends the connection).
        /// </summary>
        bool CoordNotice(Frame f, out ConnFailure fl)
        {
            fl = null;
            if (f.Id == 0)
            {
                Action<Frame>[] subs;
                lock (subsMu) subs = coordSubs.ToArray();
                foreach (var s in subs) s(f);
                return true;
            }
            if (f.Op == CoordOp.Changed)
            {
                Action<Frame> w;
                lock (mu)
                {
                    if (watches.TryGetValue(f.Id, out w)) watches.Remove(f.Id); // one-shot
                    else
                    {
                        // The Changed of a describe whose answer has not come yet.
                        Call p;
                        if (pending.TryGetValue(f.Id, out p) && p.Watch != null) { w = p.Watch; p.Watch = null; }
                    }
                }
                if (w != null) w(f);
                return true;
            }
            if (f.Op == CoordOp.Queued)
            {
                Action<Frame> note;
                lock (mu)
                {
                    Call cl;
                    if (!pending.TryGetValue(f.Id, out cl) || cl.Type != FrameType.Coord)
                    {
                        fl = Protocol("coordination Queued for request id " + f.Id + ", which is not a coordination request in flight");
                        return true;
                    }
                    FreeLargeLocked(cl); // the server has read all of it
                    note = cl.Abandoned ? null : cl.Note;
                }
                if (note != null) note(f);
                return true;
            }
            return false;
        }

        void FreeLargeLocked(Call cl)
        {
            if (!cl.LargeHeld) return;
            cl.LargeHeld = false;
            Interlocked.Decrement(ref largeHeld);
            largeSlot.Release();
        }

        /// <summary>The connection ended: every large slot held by a pending request is free again.</summary>
        void FailCoord(List<Call> pend)
        {
            lock (mu) foreach (var cl in pend) FreeLargeLocked(cl);
        }

        /// <summary>
        /// Sends one K request and waits for its final answer. ct ending
        /// throws OperationCanceledException (the request is abandoned: its
        /// answer is dropped); stop ending reports it Lost, as a lost
        /// connection. note receives its Queued notifications, watch (a
        /// describe that sets a watch) its Changed; both are called on the
        /// reader and must only queue work.
        /// </summary>
        internal async Task<CoordResult> CoordCallAsync(byte op, byte[] body, bool acquire, bool large,
            Action<Frame> note, Action<Frame> watch, CancellationToken ct, CancellationToken stop)
        {
            coordReplies = true;
            var cl = new Call(FrameType.Coord, "") { CoordAcquire = acquire, Large = large, Note = note, Watch = watch };
            if (large)
            {
                try
                {
                    using (var linked = CancellationTokenSource.CreateLinkedTokenSource(ct, stop, DeadCts.Token))
                        await largeSlot.WaitAsync(linked.Token).ConfigureAwait(false);
                }
                catch (OperationCanceledException)
                {
                    ct.ThrowIfCancellationRequested();
                    return new CoordResult { NotSent = true };
                }
                catch (ObjectDisposedException)
                {
                    ct.ThrowIfCancellationRequested();
                    return new CoordResult { NotSent = true };
                }
                cl.LargeHeld = true;
                int n = Interlocked.Increment(ref largeHeld);
                int seen;
                while (n > (seen = Volatile.Read(ref LargeHeldMax)) && Interlocked.CompareExchange(ref LargeHeldMax, n, seen) != seen) { }
            }
            StartResult started;
            try
            {
                started = await StartAsync(cl, new Frame { Type = FrameType.Coord, Op = op, Body = body }, ct).ConfigureAwait(false);
            }
            catch (Exception)
            {
                lock (mu) FreeLargeLocked(cl);
                throw;
            }
            if (started == StartResult.Gone)
            {
                lock (mu) FreeLargeLocked(cl);
                return new CoordResult { NotSent = true };
            }
            Answer a;
            if (!cl.Res.Task.IsCompleted && (ct.CanBeCanceled || stop.CanBeCanceled))
            {
                var left = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                using (ct.Register(() => left.TrySetResult(true)))
                using (stop.Register(() => left.TrySetResult(true)))
                {
                    await Task.WhenAny(cl.Res.Task, left.Task).ConfigureAwait(false);
                }
            }
            if (cl.Res.Task.IsCompleted) a = cl.Res.Task.Result;
            else if (cl.Res.Task.IsCompleted == false && !ct.IsCancellationRequested && !stop.IsCancellationRequested) a = await cl.Res.Task.ConfigureAwait(false);
            else
            {
                a = Abandon(cl);
                if (a == null)
                {
                    if (ct.IsCancellationRequested) throw new OperationCanceledException(ct);
                    return new CoordResult { Lost = true, Sent = cl.Sent };
                }
            }
            if (a.Fail != null) return new CoordResult { Lost = true, Sent = cl.Sent };
            return new CoordResult { F = a.F, Sent = cl.Sent };
        }

        /// <summary>The server's ending of this connection was an E frame (a request in flight may be what it refused).</summary>
        internal bool EndedByServer
        {
            get { var f = Failure; return f != null && f.Kind == FailKind.ServerError; }
        }

        /// <summary>Ends a connection of a session's own (never the broker's shared one).</summary>
        internal void CloseDedicated()
        {
            Fail(new ConnFailure { Kind = FailKind.Closed, Addr = Addr });
        }
    }
}
