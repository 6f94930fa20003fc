using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Runtime.ExceptionServices;
using System.Threading;
using System.Threading.Tasks;

namespace Ticketing
{
    /// <summary>
    /// A granted ticket. Its Token fences every write made under it: in the
    /// same database transaction as the protected write, reject the write if
    /// Token is not above the stored high-water token, store Token as the new
    /// high-water, write, commit, and only then release. Release it with
    /// ReleaseAsync (to learn the outcome), DisposeAsync (awaits the bounded
    /// release, reports its outcome to the broker's release observer) or
    /// Dispose (queues the release in the background and returns at once).
    /// </summary>
    public sealed class Ticket : IDisposable, IAsyncDisposable
    {
        readonly TicketBroker b;
        readonly long deadline; // Stopwatch ticks
        readonly object mu = new object();
        bool started; // a release is under way or done; false again after a release of which nothing was sent
        TaskCompletionSource<Exception> done = NewOutcome(); // the outcome of the latest release attempt

        internal Ticket(TicketBroker b, string key, ulong token, long deadline, TimeSpan lease, TimeSpan queued)
        {
            this.b = b; Key = key; Token = token; this.deadline = deadline; Lease = lease; Queued = queued;
            DeadlineUtc = DateTime.UtcNow + Remaining;
        }

        static TaskCompletionSource<Exception> NewOutcome()
        {
            return new TaskCompletionSource<Exception>(TaskCreationOptions.RunContinuationsAsynchronously);
        }

        /// <summary>The key the ticket holds.</summary>
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
        public TimeSpan Remaining { get { return Arguments.SinceTicks(Stopwatch.GetTimestamp(), deadline); } }

        /// <summary>The conservative deadline as a UTC wall-clock time (for logs; Remaining is authoritative).</summary>
        public DateTime DeadlineUtc { get; private set; }

        /// <summary>A background release finished (the releaser reports it).</summary>
        internal void Finish(Exception e)
        {
            TaskCompletionSource<Exception> d;
            lock (mu) d = done;
            d.TrySetResult(e);
        }

        /// <summary>
        /// Starts a release unless one is under way or done: true with the
        /// attempt's outcome source to complete, false with the running or
        /// finished attempt's outcome to wait for.
        /// </summary>
        bool Begin(out TaskCompletionSource<Exception> outcome)
        {
            lock (mu)
            {
                if (started)
                {
                    outcome = done;
                    return false;
                }
                started = true;
                done = NewOutcome();
                outcome = done;
                return true;
            }
        }

        /// <summary>
        /// Releases the ticket and reports the outcome: completes when the
        /// server answered R; NotHeldException for N (the ticket had already
        /// expired or been released; NotHeldAfterRetryException when N answered
        /// a release sent again after a lost answer, which the earlier attempt
        /// may have released); CapacityException for a capacity reject;
        /// IndeterminateException or UnavailableException when no final answer
        /// came within ReleaseBound (5 s from this call; retried with the exact
        /// token across reconnects) or cancellationToken. A failed release is
        /// never presumed successful. A second call (or one after Dispose)
        /// waits for the first release's outcome and reports it. The
        /// exception is a release of which nothing was sent (the token ended
        /// first, or no connection could be had): the ticket then stays
        /// releasable, so a later ReleaseAsync, DisposeAsync or Dispose still
        /// sends it. Without a token it is bounded by ReleaseBound alone.
        /// </summary>
        /// <param name="cancellationToken">Ends the wait; if nothing was sent yet, nothing is sent and the ticket stays releasable.</param>
        /// <returns>A task that completes when the server answered R.</returns>
        /// <exception cref="NotHeldException">The server answered N.</exception>
        /// <exception cref="CapacityException">A server capacity limit rejected the release.</exception>
        /// <exception cref="PermissionDeniedException">The server refused the release for this client's principal.</exception>
        /// <exception cref="IndeterminateException">A release may have been sent but no final answer came in time.</exception>
        /// <exception cref="UnavailableException">No release could be sent within the bound.</exception>
        /// <exception cref="ClosedException">The broker was closed before anything was sent.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public async Task ReleaseAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            TaskCompletionSource<Exception> outcome;
            if (!Begin(out outcome))
            {
                var ct = cancellationToken;
                var never = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                using (ct.Register(() => never.TrySetResult(true)))
                {
                    await Task.WhenAny(outcome.Task, never.Task).ConfigureAwait(false);
                }
                if (!outcome.Task.IsCompleted)
                    throw new OperationCanceledException(TicketBroker.Op("release of token " + Token + " for", Key) +
                        "an earlier release of this ticket is still running and its outcome is not known yet", ct);
                var prior = outcome.Task.Result;
                if (prior != null) ExceptionDispatchInfo.Capture(prior).Throw();
                return;
            }
            var err = await ReleaseOnceAsync(outcome, cancellationToken).ConfigureAwait(false);
            if (err != null) ExceptionDispatchInfo.Capture(err).Throw();
        }

        /// <summary>One release attempt: its outcome, also given to outcome; the ticket stays releasable when nothing was sent.</summary>
        async Task<Exception> ReleaseOnceAsync(TaskCompletionSource<Exception> outcome, CancellationToken ct)
        {
            var st = new OpState();
            Exception err = null;
            try
            {
                await b.Releaser.ReleaseAsync(Key, Token, Stopwatch.GetTimestamp(), false, st, ct).ConfigureAwait(false);
            }
            catch (Exception e)
            {
                err = e;
            }
            if (err != null && !st.Sent)
            {
                // Nothing reached the server (the Go client's rule): a later
                // release, DisposeAsync or Dispose still sends it.
                lock (mu) started = false;
            }
            outcome.TrySetResult(err);
            return err;
        }

        /// <summary>
        /// Releases the ticket in the background, best effort, and returns at
        /// once, never blocking. The release is queued (bounded queue, fixed
        /// number of workers) and retried with the exact token for
        /// ReleaseBound from when it was queued; its outcome goes to the
        /// release observer and the ReleaseFailed event. When the queue is full
        /// the release is dropped (reported as ReleaseDroppedException) and the
        /// ticket expires with its lease. After a release that was sent, or a
        /// second time, it does nothing. Use ReleaseAsync when the outcome
        /// matters, DisposeAsync to wait for the release.
        /// </summary>
        public void Dispose()
        {
            TaskCompletionSource<Exception> outcome;
            if (!Begin(out outcome)) return;
            b.EnqueueTicketRelease(this);
        }

        /// <summary>
        /// Releases the ticket and waits for the release to end, bounded by
        /// ReleaseBound (5 s): what `await using` calls. It never throws; the
        /// outcome goes to the release observer and, when it failed, to the
        /// ReleaseFailed event. After ReleaseAsync or Dispose it waits for that
        /// release to end (also bounded) and reports nothing again.
        /// </summary>
        /// <returns>A task that completes when the release ended, whatever its outcome.</returns>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(DisposeCoreAsync());
        }

        async Task DisposeCoreAsync()
        {
            TaskCompletionSource<Exception> outcome;
            if (!Begin(out outcome))
            {
                await outcome.Task.ConfigureAwait(false);
                return;
            }
            var err = await ReleaseOnceAsync(outcome, CancellationToken.None).ConfigureAwait(false);
            b.ReportRelease(Key, Token, err);
        }

        /// <summary>The key and token, for logs.</summary>
        /// <returns>"ticket for "key" token N".</returns>
        public override string ToString() { return "ticket for \"" + Key + "\" token " + Token; }
    }
}
