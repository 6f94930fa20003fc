using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Ticketing
{
    /// <summary>
    /// A granted ticket. Its Token fences every write made under it: in the
    /// same database transaction as the protected write, reject the write if
    /// Token is not above the stored high-water token, store Token as the new
    /// high-water, write, commit, and only then release. Release it with
    /// ReleaseAsync (to learn the outcome) or Dispose / DisposeAsync (best
    /// effort, in the background, never blocking).
    /// </summary>
    public sealed class Ticket : IDisposable
#if NETSTANDARD2_1_OR_GREATER || NET
        , IAsyncDisposable
#endif
    {
        readonly TicketBroker b;
        readonly long deadline; // Stopwatch ticks
        readonly object mu = new object();
        bool started;
        readonly TaskCompletionSource<Exception> done =
            new TaskCompletionSource<Exception>(TaskCreationOptions.RunContinuationsAsynchronously);

        internal Ticket(TicketBroker b, string key, ulong token, long deadline, TimeSpan lease, TimeSpan queued)
        {
            this.b = b; Key = key; Token = token; this.deadline = deadline; Lease = lease; Queued = queued;
            DeadlineUtc = DateTime.UtcNow + Remaining;
        }

        public string Key { get; private set; }

        /// <summary>The fencing token: strictly larger than every token granted before it, for any key.</summary>
        public ulong Token { get; private set; }

        /// <summary>The lease the server granted.</summary>
        public TimeSpan Lease { get; private set; }

        /// <summary>How long the acquire waited in the key's queue, as the server reported it.</summary>
        public TimeSpan Queued { get; private set; }

        /// <summary>
        /// Time left until the conservative end of the lease, measured on this
        /// machine's monotonic clock from the moment the acquire was sent:
        /// never later than the server's end of the lease. Negative once passed.
        /// Finish the protected work before it reaches zero.
        /// </summary>
        public TimeSpan Remaining { get { return TicketBroker.SinceTicks(Stopwatch.GetTimestamp(), deadline); } }

        /// <summary>The conservative deadline as a UTC wall-clock time (for logs; Remaining is authoritative).</summary>
        public DateTime DeadlineUtc { get; private set; }

        internal void Finish(Exception e) { done.TrySetResult(e); }

        /// <summary>
        /// Releases the ticket and reports the outcome: completes when the
        /// server answered R; NotHeldException for N (the ticket had already
        /// expired or been released; NotHeldAfterRetryException when N answered
        /// a release sent again after a lost answer, which the earlier attempt
        /// may have released); CapacityException for a capacity reject;
        /// IndeterminateException or UnavailableException when no final answer
        /// came within ReleaseBound (5 s from this call; retried with the exact
        /// token across reconnects) or ct. A failed release is never presumed
        /// successful. A second call (or one after Dispose) waits for the first
        /// release's outcome and reports it.
        /// </summary>
        public async Task ReleaseAsync(CancellationToken ct = default(CancellationToken))
        {
            bool first;
            lock (mu)
            {
                first = !started;
                started = true;
            }
            if (!first)
            {
                var never = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                using (ct.Register(() => never.TrySetResult(true)))
                {
                    await Task.WhenAny(done.Task, never.Task).ConfigureAwait(false);
                }
                if (!done.Task.IsCompleted)
                    throw new OperationCanceledException(TicketBroker.Op("release of token " + Token + " for", Key) +
                        "an earlier release of this ticket is still running and its outcome is not known yet", ct);
                var prior = done.Task.Result;
                if (prior != null) throw prior;
                return;
            }
            Exception err = null;
            try
            {
                await b.ReleaseAsync(Key, Token, Stopwatch.GetTimestamp(), false, ct).ConfigureAwait(false);
            }
            catch (Exception e)
            {
                err = e;
            }
            Finish(err);
            if (err != null) throw err;
        }

        /// <summary>
        /// Releases the ticket in the background, best effort, and returns at
        /// once. The release is queued (bounded queue, fixed number of workers)
        /// and retried with the exact token for ReleaseBound from when it was
        /// queued; its outcome goes to the release observer. When the queue is
        /// full the release is dropped (reported as ReleaseDroppedException) and
        /// the ticket expires with its lease. After ReleaseAsync, or a second
        /// time, it does nothing. Use ReleaseAsync when the outcome matters.
        /// </summary>
        public void Dispose()
        {
            lock (mu)
            {
                if (started) return;
                started = true;
            }
            b.EnqueueTicketRelease(this);
        }

#if NETSTANDARD2_1_OR_GREATER || NET
        /// <summary>Same as Dispose: queues the background release and completes at once.</summary>
        public ValueTask DisposeAsync()
        {
            Dispose();
            return default(ValueTask);
        }
#endif

        public override string ToString() { return "ticket for \"" + Key + "\" token " + Token; }
    }

    internal sealed class RelJob
    {
        internal string Key;
        internal ulong Token;
        internal long At;       // when it was queued: the bound counts from here
        internal Ticket Ticket; // null for compensating releases
    }

    /// <summary>
    /// Background releases: a bounded queue and a fixed number of workers, so
    /// releases never pile up without bound and never block callers.
    /// </summary>
    internal sealed class Releaser
    {
        readonly TicketBroker b;
        readonly object mu = new object();
        readonly Queue<RelJob> q = new Queue<RelJob>();
        readonly SemaphoreSlim items = new SemaphoreSlim(0);
        readonly CancellationTokenSource cts = new CancellationTokenSource();
        readonly Task[] workers;
        bool shut;
        // Releases by owner wait for a reconnect, possibly for long; the
        // broker's close does not wait for them but cancels them.
        readonly CancellationTokenSource ownerCts = new CancellationTokenSource();
        readonly List<Task> owners = new List<Task>();

        internal Releaser(TicketBroker b)
        {
            this.b = b;
            workers = new Task[b.Cfg.ReleaseWorkers];
            for (int i = 0; i < workers.Length; i++) workers[i] = Task.Run(() => WorkAsync());
        }

        /// <summary>Queues j without blocking; a full queue (or a closed broker) drops it, reported.</summary>
        internal void Enqueue(RelJob j)
        {
            Exception err = null;
            lock (mu)
            {
                if (shut)
                    err = new ClosedException(TicketBroker.Op("release of token " + j.Token + " for", j.Key) +
                        "not released: the broker is closed; the ticket stays held until its lease expires");
                else if (q.Count >= b.Cfg.ReleaseQueue)
                    err = new ReleaseDroppedException(TicketBroker.Op("release of token " + j.Token + " for", j.Key) +
                        "not released: the background release queue (" + b.Cfg.ReleaseQueue + ") is full; the ticket stays held until its lease expires (use ReleaseAsync to release synchronously)");
                else
                {
                    q.Enqueue(j);
                    items.Release();
                }
            }
            if (err != null) Report(j, err);
        }

        /// <summary>Starts a release by owner (U) of key for an acquire whose answer was lost.</summary>
        internal void EnqueueOwner(string key, byte[] owner, long until)
        {
            lock (mu)
            {
                if (shut) return;
                owners.RemoveAll(t => t.IsCompleted);
                owners.Add(Task.Run(async () =>
                {
                    Exception err = null;
                    try { await b.ReleaseOwnerAsync(key, owner, until, ownerCts.Token).ConfigureAwait(false); }
                    catch (Exception e) { err = e; }
                    var obs = b.Cfg.OwnerObserver;
                    if (obs != null)
                    {
                        try { obs(key, owner, err); } catch (Exception) { }
                    }
                }));
            }
        }

        async Task WorkAsync()
        {
            for (;;)
            {
                await items.WaitAsync().ConfigureAwait(false);
                RelJob j;
                lock (mu)
                {
                    if (q.Count == 0)
                    {
                        if (shut) return;
                        continue;
                    }
                    j = q.Dequeue();
                }
                Exception err = null;
                try
                {
                    await b.ReleaseAsync(j.Key, j.Token, j.At, true, cts.Token).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    err = e;
                    if (cts.IsCancellationRequested && !(e is ClosedException))
                        err = new ClosedException(TicketBroker.Op("release of token " + j.Token + " for", j.Key) +
                            "abandoned: the broker was closed before the background release finished; the ticket may stay held until its lease expires (" + e.Message + ")");
                }
                Report(j, err);
            }
        }

        void Report(RelJob j, Exception err)
        {
            if (j.Ticket != null) j.Ticket.Finish(err);
            var obs = b.Cfg.Observer;
            if (obs != null)
            {
                try { obs(j.Key, j.Token, err); } catch (Exception) { }
            }
        }

        /// <summary>Stops accepting jobs and lets the workers finish the queue for at most grace; then cancels the rest.</summary>
        internal async Task DrainAsync(TimeSpan grace)
        {
            lock (mu)
            {
                if (!shut)
                {
                    shut = true;
                    items.Release(workers.Length);
                }
            }
            cts.CancelAfter(grace);
            await Task.WhenAll(workers).ConfigureAwait(false);
            cts.Cancel();
            ownerCts.Cancel();
            Task[] rest;
            lock (mu) rest = owners.ToArray();
            await Task.WhenAll(rest).ConfigureAwait(false);
        }
    }
}
