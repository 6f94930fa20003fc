using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing
{
    /// <summary>
    /// The client: one per process, safe for concurrent use by any number of
    /// threads. It keeps one connection to the cluster leader and multiplexes
    /// every request over it, reconnecting in the background (to the leader
    /// named by an M frame, otherwise to the listed addresses in turn, with
    /// jittered exponential backoff).
    /// </summary>
    public sealed partial class TicketBroker : IDisposable, IAsyncDisposable, IConnHooks
    {
        /// <summary>Longest wait in the key's queue (0 is one immediate attempt).</summary>
        public static readonly TimeSpan MaxWait = TimeSpan.FromSeconds(255);
        /// <summary>Shortest lease.</summary>
        public static readonly TimeSpan MinLease = TimeSpan.FromSeconds(1);
        /// <summary>Longest lease, and longest work budget.</summary>
        public static readonly TimeSpan MaxLease = TimeSpan.FromSeconds(250);
        /// <summary>Longest key, in UTF-8 bytes.</summary>
        public static readonly int MaxKeyBytes = 1024;
        /// <summary>The former name of MaxKeyBytes.</summary>
        [Obsolete("Renamed MaxKeyBytes (the unit in the name); MaxKey will be removed in a later version.")]
        public static readonly int MaxKey = MaxKeyBytes;
        /// <summary>How long a release (explicit, background or compensating) retries the exact token, from the call or from when it was queued.</summary>
        public static readonly TimeSpan ReleaseBound = TimeSpan.FromSeconds(5);
        /// <summary>Default capacity of the background release queue (TicketBrokerBuilder.ReleaseQueue).</summary>
        public static readonly int DefaultReleaseQueue = 1024;
        /// <summary>How many background releases run at the same time.</summary>
        public static readonly int ReleaseWorkers = 4;
        /// <summary>Default bound of one connection attempt: TCP, TLS and hello (TicketBrokerBuilder.DialTimeout).</summary>
        public static readonly TimeSpan DefaultDialTimeout = TimeSpan.FromSeconds(5);
        /// <summary>
        /// Default bound of every call, with or without a cancellation token
        /// (TicketBrokerBuilder.OperationTimeout); an acquire's wait is added to it.
        /// </summary>
        public static readonly TimeSpan DefaultOperationTimeout = TimeSpan.FromSeconds(10);
        /// <summary>Assumed worst-case clock rate difference, percent of lease plus queued time.</summary>
        public static readonly int ClockDriftPercent = 1;
        /// <summary>Fixed margin subtracted from the deadline for millisecond truncation.</summary>
        public static readonly TimeSpan ClockDriftMargin = TimeSpan.FromMilliseconds(100);

        internal readonly Config Cfg;
        // The collaborators, as in the Java client: the connection to the
        // leader, each kind of request, and the background releases.
        internal readonly Connector Connector;
        internal readonly Acquirer Acquirer;
        internal readonly Releaser Releaser;
        internal readonly OwnerReleaser OwnerReleaser;
        internal readonly Describer Describer;
        readonly ReleaseQueue rel;
        readonly TaskCompletionSource<bool> closedDone = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
        internal int Dials { get { return Connector.Dials; } } // tests: connection attempts made
        internal Connection CurrentForTests { get { return Connector.Current; } }

        /// <summary>
        /// A session with a server began (the first connection, and every
        /// reconnect). Raised on the broker's connection task: handlers must
        /// return quickly; an exception they throw is ignored.
        /// </summary>
        public event EventHandler<ConnectedEventArgs> Connected;

        /// <summary>
        /// A session ended (dropped, silent, the server stopped leading or
        /// sent an error; not when the broker is closed). Calls wait for the
        /// reconnect. Raised like Connected.
        /// </summary>
        public event EventHandler<DisconnectedEventArgs> Disconnected;

        /// <summary>A new session is with another server than the previous one (a leader change or failover). Raised like Connected, after it.</summary>
        public event EventHandler<LeaderChangedEventArgs> LeaderChanged;

        /// <summary>
        /// A release that no caller awaits failed: Ticket.Dispose and
        /// DisposeAsync, and the compensating release of a grant that arrived
        /// after its caller left. Raised on the releasing thread: handlers
        /// must return quickly; an exception they throw is ignored.
        /// </summary>
        public event EventHandler<ReleaseFailedEventArgs> ReleaseFailed;

        /// <summary>Calls an event's handlers, ignoring what they throw.</summary>
        void Raise<T>(EventHandler<T> handlers, T args) where T : EventArgs
        {
            if (handlers == null) return;
            foreach (EventHandler<T> h in handlers.GetInvocationList())
            {
                try { h(this, args); } catch (Exception) { }
            }
        }

        internal void OnConnected(ConnectedEventArgs e) { Raise(Connected, e); }
        internal void OnDisconnected(DisconnectedEventArgs e) { Raise(Disconnected, e); }
        internal void OnLeaderChanged(LeaderChangedEventArgs e) { Raise(LeaderChanged, e); }

        internal TicketBroker(Config cfg)
        {
            Cfg = cfg;
            Connector = new Connector(this, cfg);
            Acquirer = new Acquirer(this);
            Releaser = new Releaser(this);
            OwnerReleaser = new OwnerReleaser(this);
            Describer = new Describer(this);
            rel = new ReleaseQueue(this);
            Connector.Start();
        }

        /// <summary>
        /// A broker for the comma-separated server addresses ("host:port,host:port"),
        /// without token or TLS. It returns at once and connects in the
        /// background; use WaitReadyAsync.
        /// </summary>
        /// <param name="addresses">host:port[,host:port...]</param>
        /// <returns>The broker; one per process, disposed when the application ends.</returns>
        /// <exception cref="ArgumentNullException">addresses is null.</exception>
        /// <exception cref="ArgumentException">addresses is empty or an address is not host:port.</exception>
        public static TicketBroker Connect(string addresses)
        {
            return CreateBuilder().Addresses(addresses).Connect();
        }

        /// <summary>A builder for a broker with a token, TLS or other options.</summary>
        /// <returns>A new builder.</returns>
        public static TicketBrokerBuilder CreateBuilder() { return new TicketBrokerBuilder(); }

        internal static string[] ParseAddresses(string s)
        {
            var list = new List<string>();
            foreach (var part in (s ?? "").Split(','))
            {
                var a = part.Trim();
                if (a.Length == 0) continue;
                string host; int port;
                Connection.SplitAddr(a, out host, out port);
                list.Add(a);
            }
            if (list.Count == 0) throw new ArgumentException("ticketing: the address list \"" + s + "\" is empty; give host:port[,host:port...]", "addresses");
            return list.ToArray();
        }

        /// <summary>
        /// The cluster this broker is pinned to (32 hex digits): the one given
        /// to the builder's ClusterId, or the cluster of the first server that
        /// reported one; null until then.
        /// </summary>
        public string ClusterId { get { return Cfg.Pin.Get(); } }

        void IConnHooks.LateGrant(string key, ulong token) { LateGrant(key, token); }

        internal bool IsClosed { get { return Connector.IsClosed; } }

        /// <summary>An acquire's connection ended before its final answer: release by owner (U) on a later connection.</summary>
        void IConnHooks.Orphaned(string key, byte[] owner, long until) { rel.EnqueueOwner(key, owner, until); }

        /// <summary>Waits for the next change of the connection state; false when ct ended first.</summary>
        internal Task<bool> WaitChangeAsync(CancellationToken ct) { return Connector.WaitChangeAsync(ct); }

        /// <summary>The outcome of a background or disposing release, to the release observer.</summary>
        internal void ReportRelease(string key, ulong token, Exception err)
        {
            var obs = Cfg.Observer;
            if (obs != null)
            {
                try { obs(key, token, err); } catch (Exception) { }
            }
            if (err != null) Raise(ReleaseFailed, new ReleaseFailedEventArgs(key, token, err));
        }

        /// <summary>A G arrived for an acquire whose caller left (or too late for its budget): release that exact token in the background.</summary>
        internal void LateGrant(string key, ulong token)
        {
            rel.Enqueue(new RelJob { Key = key, Token = token, At = Stopwatch.GetTimestamp() });
        }

        /// <summary>A live connection to the leader, waiting for one while ct allows (Connector.GetConnAsync).</summary>
        internal Task<Connection> GetConnAsync(CancellationToken ct, bool draining) { return Connector.GetConnAsync(ct, draining); }

        internal static string Op(string op, string key)
        {
            return "ticketing: " + op + (key != null ? " \"" + key + "\"" : "") + ": ";
        }

        /// <summary>
        /// Waits until the broker is connected to the leader and the hello is
        /// done. Throws promptly UnauthenticatedException (a refused token or
        /// client certificate), or UnavailableException / CapacityException for
        /// another persistent refusal (unsupported version, untrusted server
        /// certificate, TLS on one side only, connection limit), while the
        /// server refuses the connection; the broker keeps retrying in the
        /// background.
        /// </summary>
        /// <param name="timeout">How long to wait; Timeout.InfiniteTimeSpan for as long as cancellationToken allows.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <returns>A task that completes once a connection to the leader is ready.</returns>
        /// <exception cref="UnavailableException">timeout passed first (the message says what the last attempt ran into), or a persistent refusal.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="CapacityException">Every server is at its connection limit.</exception>
        /// <exception cref="ClosedException">The broker was closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        /// <exception cref="ArgumentOutOfRangeException">timeout is negative (other than Timeout.InfiniteTimeSpan).</exception>
        public Task WaitReadyAsync(TimeSpan timeout, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (timeout < TimeSpan.Zero && timeout != Timeout.InfiniteTimeSpan)
                throw new ArgumentOutOfRangeException("timeout", timeout, "ticketing: the timeout must not be negative");
            return Connector.WaitReadyAsync(timeout, cancellationToken);
        }

        /// <summary>
        /// Waits for the connection for at most the operation timeout, or less
        /// when cancellationToken ends sooner (see the overload with a
        /// timeout, which takes Timeout.InfiniteTimeSpan to wait as long as
        /// the token allows).
        /// </summary>
        /// <param name="cancellationToken">Ends the wait sooner than the operation timeout.</param>
        /// <returns>A task that completes once a connection to the leader is ready.</returns>
        /// <exception cref="UnavailableException">The operation timeout passed first, or a persistent refusal.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="ClosedException">The broker was closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task WaitReadyAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return WaitReadyAsync(Cfg.OperationTimeout, cancellationToken);
        }

        // ---------------- calls: thin fronts over the collaborators ----------------

        /// <summary>
        /// Asks for the ticket of key and waits for the answer. Fractions of a
        /// second are rounded up; values out of range are rejected before
        /// anything is sent (never clamped).
        /// <para>If cancellationToken ends before the request was sent, nothing
        /// is sent (OperationCanceledException). If it ends after the request
        /// may have been sent, the call throws OperationCanceledException at
        /// once and sends a cancel (C) for the acquire; should the server grant
        /// it anyway, the client releases that exact token in the background.
        /// While the connection's in-flight limit is reached, the call waits
        /// for a free slot (having sent nothing).</para>
        /// <para>With or without a token the call ends within the broker's
        /// operation timeout (TicketBrokerBuilder.OperationTimeout, default
        /// 10 s) plus wait, or sooner when the token ends, as
        /// HttpClient.Timeout does: UnavailableException if nothing was sent,
        /// IndeterminateException if the acquire may have been sent (cancelled
        /// and a late grant released as above).</para>
        /// </summary>
        /// <param name="key">The key, 1..1024 UTF-8 bytes.</param>
        /// <param name="wait">0..255 s: how long the server keeps the request in the key's FIFO queue; zero is one immediate attempt, never queued.</param>
        /// <param name="lease">1..250 s: how long the ticket is held unless released.</param>
        /// <param name="budget">Required, at most lease × 0.99 − 0.1 s (what even an immediate grant leaves; rounded up to whole seconds): the minimum time the caller needs for its work; a ticket is handed over only if its conservative remaining time is positive and at least budget, otherwise it is released and BudgetExceededException thrown.</param>
        /// <param name="cancellationToken">Ends the call sooner than the operation timeout (see above).</param>
        /// <returns>The granted ticket; release it (ReleaseAsync, await using / DisposeAsync, or Dispose).</returns>
        /// <exception cref="ArgumentNullException">key is null (thrown by the call itself).</exception>
        /// <exception cref="ArgumentException">key is empty or over 1024 bytes (thrown by the call itself).</exception>
        /// <exception cref="ArgumentOutOfRangeException">wait, lease or budget is out of range (thrown by the call itself).</exception>
        /// <exception cref="NotAcquiredException">Not granted within the wait, or withdrawn by the server.</exception>
        /// <exception cref="CapacityException">A server limit; final, not retried.</exception>
        /// <exception cref="IndeterminateException">The request may have been sent but its final answer was lost: do not enter the critical section; it is never re-sent automatically, except after a stopping server's E 11 (shutting down), which sends it again with the same owner and what remains of its wait on the next connection.</exception>
        /// <exception cref="BudgetExceededException">Granted too late for the budget; it is being released.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="PermissionDeniedException">The server refused the request for this client's principal.</exception>
        /// <exception cref="UnavailableException">Nothing could be sent in time (no connection).</exception>
        /// <exception cref="ClosedException">The broker was closed before the request was sent, or the grant came while it closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task<Ticket> AcquireAsync(string key, TimeSpan wait, TimeSpan lease, TimeSpan budget,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var args = Arguments.CheckAcquire(key, wait, lease, budget);
            return Acquirer.AcquireAsync(key, args, cancellationToken);
        }

        /// <summary>
        /// Releases key's ticket if token still holds it, for a ticket known
        /// only by its key and token (acquired by another process, or whose
        /// token was persisted). Within ReleaseBound (5 s from this call, also
        /// without a token) it retries the exact token across reconnects; a
        /// release is never presumed successful.
        /// </summary>
        /// <param name="key">The key, 1..1024 UTF-8 bytes.</param>
        /// <param name="token">The ticket's token (never 0).</param>
        /// <param name="cancellationToken">Ends the call early.</param>
        /// <returns>A task that completes when the server answered R (the hold ended).</returns>
        /// <exception cref="ArgumentNullException">key is null (thrown by the call itself).</exception>
        /// <exception cref="ArgumentException">key is empty or over 1024 bytes (thrown by the call itself).</exception>
        /// <exception cref="ArgumentOutOfRangeException">token is 0 (thrown by the call itself).</exception>
        /// <exception cref="NotHeldException">N: the ticket had already expired or been released, or the key is held under another token (NotHeldAfterRetryException when N answered a release sent again).</exception>
        /// <exception cref="CapacityException">A server capacity limit rejected it.</exception>
        /// <exception cref="PermissionDeniedException">The server refused it for this client's principal.</exception>
        /// <exception cref="IndeterminateException">A release may have been sent but no final answer came within the bound.</exception>
        /// <exception cref="UnavailableException">None could be sent within the bound.</exception>
        /// <exception cref="ClosedException">The broker was closed before it was sent.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task ReleaseTokenAsync(string key, ulong token, CancellationToken cancellationToken = default(CancellationToken))
        {
            string op = "release of token " + token + " for";
            Arguments.CheckKey(key, op);
            if (token == 0)
                throw new ArgumentOutOfRangeException("token", token, Op(op, key) + "token 0 is never granted (tokens start at 1); nothing was sent");
            return Releaser.ReleaseAsync(key, token, Stopwatch.GetTimestamp(), false, null, cancellationToken);
        }

        /// <summary>
        /// Reads the state of key (D/I). Read-only and never retried
        /// automatically. The call ends within the operation timeout, or sooner
        /// when the token ends; on a live connection that does not answer, within the
        /// answer grace (10 s, or 3 ping intervals if longer) in any case.
        /// </summary>
        /// <param name="key">The key, 1..1024 UTF-8 bytes.</param>
        /// <param name="cancellationToken">Ends the call sooner than the operation timeout.</param>
        /// <returns>The key's state as the leader saw it when it answered.</returns>
        /// <exception cref="ArgumentNullException">key is null (thrown by the call itself).</exception>
        /// <exception cref="ArgumentException">key is empty or over 1024 bytes (thrown by the call itself).</exception>
        /// <exception cref="UnavailableException">No connection in time, the connection was lost before the answer, or no answer within the grace.</exception>
        /// <exception cref="PermissionDeniedException">The server refused it for this client's principal.</exception>
        /// <exception cref="CapacityException">A server capacity limit rejected it.</exception>
        /// <exception cref="UnauthenticatedException">Every server refused the token or the client certificate.</exception>
        /// <exception cref="ClosedException">The broker was closed.</exception>
        /// <exception cref="OperationCanceledException">cancellationToken ended first.</exception>
        public Task<KeyDescription> DescribeAsync(string key, CancellationToken cancellationToken = default(CancellationToken))
        {
            Arguments.CheckKey(key, "describe");
            return Describer.DescribeAsync(key, cancellationToken);
        }

        /// <summary>The exception of a request answered F: final, nothing happened, the connection stays open.</summary>
        internal static PermissionDeniedException Forbidden(string op, string addr, byte reason, string effect)
        {
            var r = (PermissionReason)reason;
            return new PermissionDeniedException(op + "permission denied by the server " + addr + ": " + PermissionDeniedException.ReasonName(r) + effect +
                "; the same request is refused until the server's principals change (docs/deployment.md, Authorization)", r) { Address = addr };
        }

        internal void EnqueueTicketRelease(Ticket t)
        {
            rel.Enqueue(new RelJob { Key = t.Key, Token = t.Token, At = Stopwatch.GetTimestamp(), Ticket = t });
        }

        // ---------------- closing ----------------

        /// <summary>
        /// Closes the broker, releasing what it can still reach first: acquires
        /// still waiting for their answer are cancelled (C) and their callers
        /// get IndeterminateException with BrokerClosed set; a grant that races
        /// with the cancel and arrives within a grace period (up to
        /// ReleaseBound, 5 s) is released with its exact token. Calls that had sent nothing
        /// end with ClosedException. Background releases already queued get the
        /// same grace period to finish while the connection is still open;
        /// whatever remains is abandoned and reported to the release observer
        /// (those tickets expire with their lease). Both run at once, within
        /// about ReleaseBound (5 s) in all. Safe to call more than once.
        /// </summary>
        /// <returns>A task that completes when the broker is closed; it never fails.</returns>
        public async Task CloseAsync()
        {
            if (!Connector.MarkClosed())
            {
                await closedDone.Task.ConfigureAwait(false);
                return;
            }
            // Release what can still be reached: cancel the acquires still
            // waiting, and give a grant that races with the cancel the grace
            // period to arrive, so that it is released rather than left to its lease.
            // Both phases run at once under one bound (DrainTimeout): the
            // releaser keeps accepting jobs until the cancelled acquires have
            // settled, so a late grant is still queued and released.
            var live = Connector.Current;
            Task acquiresSettled = Task.FromResult(true);
            if (live != null && !live.Dead)
            {
                var settled = live.CancelAcquiresForClose(new ConnFailure { Kind = FailKind.Closed, Addr = live.Addr });
                acquiresSettled = Task.WhenAny(settled, Task.Delay(Cfg.DrainTimeout));
            }
            await rel.DrainAsync(Cfg.DrainTimeout, acquiresSettled).ConfigureAwait(false);
            await Connector.TearDownAsync().ConfigureAwait(false);
            closedDone.TrySetResult(true);
        }

        /// <summary>
        /// Closes the broker (CloseAsync) and waits for it: blocks for at most
        /// about ReleaseBound (5 s, the drain period), plus the time to stop
        /// the connection's threads.
        /// </summary>
        public void Dispose()
        {
            CloseAsync().GetAwaiter().GetResult();
        }

        /// <summary>Closes the broker (CloseAsync): completes within about ReleaseBound (5 s).</summary>
        /// <returns>A task that completes when the broker is closed.</returns>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(CloseAsync());
        }
    }

    /// <summary>What an operation got to do before it ended: whether its request may have been sent, and an acquire's owner.</summary>
    internal sealed class OpState
    {
        internal bool Sent;
        internal byte[] Owner;
    }
}
