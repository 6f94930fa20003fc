using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Ticketing
{
    internal sealed class RelJob
    {
        internal string Key;
        internal ulong Token;
        internal long At;       // when it was queued: the bound counts from here
        internal Ticket Ticket; // null for compensating releases
    }

    /// <summary>
    /// Background releases (Ticket.Dispose, compensating releases of late
    /// grants) and releases by owner: a bounded queue and a fixed number of
    /// workers, so releases never pile up without bound and never block
    /// callers; each runs the exact-token release's bounded retries (Releaser).
    /// </summary>
    internal sealed class ReleaseQueue
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

        internal ReleaseQueue(TicketBroker b)
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
                    try { await b.OwnerReleaser.ReleaseAsync(key, owner, until, ownerCts.Token).ConfigureAwait(false); }
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
                    await b.Releaser.ReleaseAsync(j.Key, j.Token, j.At, true, null, cts.Token).ConfigureAwait(false);
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
            b.ReportRelease(j.Key, j.Token, err);
        }

        /// <summary>
        /// Lets the workers finish the queue for at most grace, accepting new
        /// jobs until acceptUntil completes (late grants of cancelled
        /// acquires); then cancels the rest.
        /// </summary>
        internal async Task DrainAsync(TimeSpan grace, Task acceptUntil)
        {
            cts.CancelAfter(grace);
            await acceptUntil.ConfigureAwait(false);
            lock (mu)
            {
                if (!shut)
                {
                    shut = true;
                    items.Release(workers.Length);
                }
            }
            await Task.WhenAll(workers).ConfigureAwait(false);
            cts.Cancel();
            ownerCts.Cancel();
            Task[] rest;
            lock (mu) rest = owners.ToArray();
            await Task.WhenAll(rest).ConfigureAwait(false);
        }
    }
}
