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
    /// <summary>
    /// One established session: a reader thread, a writer thread that
    /// coalesces every queued frame into one write, a watchdog for silence,
    /// and the table of pending requests.
    /// </summary>
    internal sealed partial class Connection
    {
        internal readonly string Addr;
        internal string NodeId;
        internal bool Leader;
        internal uint MaxIn;           // 0 = no limit
        internal TimeSpan Interval;    // the server's ping interval; zero = it sends none
        internal TimeSpan Silence;     // silence after which a busy connection is dead
        // Silence after which an idle connection (nothing pending, never a
        // coordination request) is dead: 3 of the server's idle ping
        // intervals (Y with ReadyIdlePings); zero without.
        internal TimeSpan IdleSilence;
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
        long busySince;   // when the connection last became busy (under mu)
        bool coordSent;   // a coordination request was sent: never idle again (under mu)
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
                watches.Clear();
                wbuf.Reset();
                Monitor.PulseAll(mu);
                foreach (var cl in pend)
                {
                    // Before the caller hears of it: an IndeterminateException
                    // then always has its release by owner under way. An
                    // acquire a stopping server interrupted is sent again by
                    // its caller, who releases by owner itself if it cannot be.
                    if (cl.Type == FrameType.Acquire && !f.Closed && (!f.ShuttingDown || cl.Abandoned) && hooks != null)
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
            FailCoord(pend);
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
        SemaphoreSlim Slots(Call cl)
        {
            return cl.Type == FrameType.Acquire || cl.CoordAcquire ? semAcquire : semOther;
        }

        internal async Task<StartResult> StartAsync(Call cl, Frame f, CancellationToken ct)
        {
            var sem = Slots(cl);
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
                // A watch keeps its describe's id until it fires: no new request takes it.
                do { nextId++; } while (nextId == 0 || pending.ContainsKey(nextId) || watches.ContainsKey(nextId));
                cl.Id = nextId;
                f.Id = nextId;
                // The server pings every interval from this request on.
                if (pending.Count == 0) busySince = Stopwatch.GetTimestamp();
                if (f.Type == FrameType.Coord) coordSent = true;
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
}
