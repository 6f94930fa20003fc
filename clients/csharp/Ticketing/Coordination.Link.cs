using System;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing.Coordination
{
    /// <summary>A session's use of one connection: the broker's (shared) or one of its own.</summary>
    internal sealed class Link
    {
        internal readonly Connection Conn;
        internal readonly bool Shared; // the broker's connection: session requests name the session
        internal ulong Id;             // shared: the session the requests speak for
        internal bool GivenUp;         // the deadline passed while the session used it (under the attachment's lock)
        readonly CancellationTokenSource done = new CancellationTokenSource();
        internal readonly TaskCompletionSource<bool> Ended = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        // Completed once the session has let go of this link, so that a
        // request sent again finds the next one.
        internal readonly TaskCompletionSource<bool> Detached = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        internal IDisposable Subscription;
        int failed;

        internal Link(Connection conn, bool shared)
        {
            Conn = conn; Shared = shared;
            conn.Done.Task.ContinueWith(_ => Fail(), TaskScheduler.Default);
        }

        internal CancellationToken Stop { get { return done.Token; } }

        /// <summary>Ends the link once; a connection of the session's own is closed with it, the shared one lives on.</summary>
        internal void Fail()
        {
            if (Interlocked.Exchange(ref failed, 1) == 1) return;
            var sub = Subscription;
            if (sub != null) sub.Dispose();
            try { done.Cancel(); } catch (ObjectDisposedException) { }
            if (!Shared) Conn.CloseDedicated();
            Ended.TrySetResult(true);
        }
    }

    /// <summary>A K request's outcome on one link.</summary>
    internal struct Reply
    {
        internal bool LinkLost;   // no answer: the connection ended (or the link was given up)
        internal ushort Status;
        internal CoordBody Body;
        internal long Sent;       // Stopwatch ticks before its bytes were queued; 0 if nothing was sent
    }

    /// <summary>Runs callbacks one at a time, in order, off the connection's reader.</summary>
    internal sealed class SerialQueue
    {
        readonly object mu = new object();
        Task tail = Task.FromResult(true);

        internal void Push(Action a)
        {
            lock (mu) tail = tail.ContinueWith(_ => { try { a(); } catch (Exception) { } }, TaskScheduler.Default);
        }

        /// <summary>Completes once every callback pushed before the call has run.</summary>
        internal Task Flushed()
        {
            lock (mu) return tail;
        }
    }
}
