using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Diagnostics;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing.Coordination
{
    /// <summary>A session's state as its client sees it.</summary>
    public enum SessionState
    {
        /// <summary>Connected to the leader; holds and waits are in force.</summary>
        Attached = 1,
        /// <summary>The connection was lost (or the deadline passed): the session is being restored and keeps its queue positions until its timeout.</summary>
        Detached = 2,
        /// <summary>The session ended (expired, stopped, its node dropped, or closed): its holds are released.</summary>
        Expired = 3,
    }

    /// <summary>The options of a new session.</summary>
    public sealed class SessionOptions
    {
        /// <summary>The shortest session timeout: below it the deadline's allowances leave too little time between keep-alives.</summary>
        public static readonly TimeSpan MinTimeout = TimeSpan.FromMilliseconds(500);
        /// <summary>The longest session timeout (30 min).</summary>
        public static readonly TimeSpan MaxTimeout = TimeSpan.FromMinutes(30);
        /// <summary>The default session timeout (30 s).</summary>
        public static readonly TimeSpan DefaultTimeout = TimeSpan.FromSeconds(30);

        /// <summary>How long the session survives a lost connection (MinTimeout..MaxTimeout). Its holds end on the client a little earlier than on the server: see SemaphoreLease.LostToken.</summary>
        public TimeSpan Timeout { get; set; } = DefaultTimeout;
        /// <summary>A description (up to 1024 UTF-8 bytes), shown by ListSessions and ticketctl.</summary>
        public string Description { get; set; } = "";
        /// <summary>Called at every state change, in order, one call at a time, off the connection's reader (a slow handler delays only its own later calls).</summary>
        public Action<SessionState> StateChanged { get; set; }
    }

    /// <summary>
    /// A coordination session on one node, carried by the broker's connection
    /// (or, with a server older than many sessions per connection, by one of
    /// its own). It restores itself after a lost connection; its holds end on
    /// the client at its conservative deadline. Dispose it to stop it (its
    /// holds are released at once).
    /// </summary>
    public sealed class CoordinationSession : IAsyncDisposable, IDisposable
    {
        internal readonly Attachment A;

        internal CoordinationSession(Attachment a) { A = a; }

        /// <summary>The session's id.</summary>
        public ulong Id { get { return A.Id; } }

        /// <summary>The node's path.</summary>
        public string Path { get { return A.Path; } }

        /// <summary>The state now; a session whose deadline has passed is never reported Attached, even before the deadline's timer ran.</summary>
        public SessionState State { get { return A.State; } }

        /// <summary>
        /// Fires when the client can no longer rely on the session's holds: at
        /// the conservative deadline (no answer that follows a commit for
        /// timeout × 0.99 − 100 ms since the send time of the last answered
        /// request) or when the session ends. Once the session is restored a
        /// new token is returned (the fired one stays fired); holds come back
        /// only from new acquires.
        /// </summary>
        public CancellationToken HoldsToken { get { return A.HoldsToken; } }

        /// <summary>Fires when the session has ended.</summary>
        public CancellationToken EndedToken { get { return A.LifeToken; } }

        // ---------------- semaphores ----------------

        /// <summary>Creates a persistent semaphore with the given limit (> 0) and data (up to 1 MiB).</summary>
        /// <param name="name">The semaphore's name, 1..1024 UTF-8 bytes.</param>
        /// <param name="limit">The sum of counts its owners may hold at once.</param>
        /// <param name="data">Its data (null: none).</param>
        /// <param name="cancellationToken">Ends the wait; the request may still take effect if it was sent.</param>
        /// <exception cref="CoordinationException">Refused (AlreadyExists, LimitExceeded, ...).</exception>
        /// <exception cref="IndeterminateException">The connection was lost before the answer.</exception>
        public Task CreateSemaphoreAsync(string name, ulong limit, byte[] data = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            var n = Args.Name(name);
            if (limit == 0) throw new ArgumentOutOfRangeException("limit", "coordination: a semaphore's limit must be at least 1");
            var d = Args.Data(data, "data");
            return A.DoAsync("create semaphore " + name, CoordOp.CreateSemaphore, new CoordBody { Name = n, Limit = limit, Data = d }, false, null, null, null, cancellationToken);
        }

        /// <summary>Replaces the semaphore's data (no ownership needed).</summary>
        /// <param name="name">The semaphore's name.</param>
        /// <param name="data">The new data (null: empty), up to 1 MiB.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        public Task UpdateSemaphoreAsync(string name, byte[] data, CancellationToken cancellationToken = default(CancellationToken))
        {
            var n = Args.Name(name);
            var d = Args.Data(data, "data");
            return A.DoAsync("update semaphore " + name, CoordOp.UpdateSemaphore, new CoordBody { Name = n, Data = d }, false, null, null, null, cancellationToken);
        }

        /// <summary>Deletes the semaphore. Without force a semaphore in use is PreconditionFailed; with force its waiters are aborted and its owners lose their leases (their LostToken fires).</summary>
        /// <param name="name">The semaphore's name.</param>
        /// <param name="force">Delete it even while held or awaited.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        public Task DeleteSemaphoreAsync(string name, bool force = false, CancellationToken cancellationToken = default(CancellationToken))
        {
            var n = Args.Name(name);
            return A.DoAsync("delete semaphore " + name, CoordOp.DeleteSemaphore, new CoordBody { Name = n, Flags = force ? CoordFlag.Force : (byte)0 }, false, null, null, null, cancellationToken);
        }

        /// <summary>
        /// Acquires units of the semaphore, waiting in its FIFO queue. An
        /// acquire whose connection is lost is sent again once the session is
        /// restored (a repeated acquire replaces the earlier one and keeps its
        /// queue position), with the time left of its timeout. If the token
        /// ends while queued, the call throws OperationCanceledException at
        /// once and the wait is withdrawn (a release) in the background.
        /// </summary>
        /// <param name="name">The semaphore's name.</param>
        /// <param name="options">Count, timeout, ephemeral, data (null: one unit, waiting until the token ends).</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <exception cref="SemaphoreNotAcquiredException">Timeout zero and not free, or the timeout passed in the queue.</exception>
        /// <exception cref="DeadlinePassedException">Granted, but the session's deadline passed before the answer.</exception>
        public async Task<SemaphoreLease> AcquireSemaphoreAsync(string name, AcquireOptions options = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            var n = Args.Name(name);
            var o = options ?? new AcquireOptions();
            if (o.Count == 0) throw new ArgumentOutOfRangeException("options", "coordination: acquire count must be at least 1 (AcquireOptions.Count)");
            if (o.Timeout.HasValue && o.Timeout.Value < TimeSpan.Zero) throw new ArgumentOutOfRangeException("options", "coordination: acquire timeout must not be negative (AcquireOptions.Timeout)");
            var d = Args.Data(o.Data, "options");
            await A.AwaitWithdrawal(name).ConfigureAwait(false);
            var body = new CoordBody { Name = n, Count = o.Exclusive ? CoordFlag.Exclusive : o.Count, Data = d, Flags = o.Ephemeral ? CoordFlag.Ephemeral : (byte)0 };
            long start = Stopwatch.GetTimestamp();
            Action before = () =>
            {
                if (!o.Timeout.HasValue) { body.TimeoutMs = CoordFlag.WaitForever; return; }
                long elapsedMs = (Stopwatch.GetTimestamp() - start) * 1000 / Stopwatch.Frequency;
                body.TimeoutMs = (ulong)Math.Max(0, (long)o.Timeout.Value.TotalMilliseconds - elapsedMs);
            };
            var onQueued = o.Queued;
            int queued = 0;
            Action<Frame> note = null;
            if (onQueued != null)
                note = f =>
                {
                    if (f.Op != CoordOp.Queued) return;
                    CoordBody q;
                    try { q = CoordCodec.Reply(f.Op, f.Code, f.Body); } catch (WireException) { return; }
                    Interlocked.Exchange(ref queued, 1);
                    A.Callbacks.Push(() => onQueued(q.OrderId));
                };
            CoordBody ans;
            try
            {
                ans = await A.DoAsync("acquire " + name, CoordOp.Acquire, body, true, note, null, before, cancellationToken).ConfigureAwait(false);
            }
            catch (Exception e) when (e is OperationCanceledException || e is IndeterminateException)
            {
                // Withdraw the wait (or a grant that raced with the cancel).
                A.Withdraw(() => ReleaseCoreAsync(n, name, A.LifeToken), name);
                throw;
            }
            finally
            {
                // The queued callback runs before the acquire returns.
                if (Volatile.Read(ref queued) == 1) await A.Callbacks.Flushed().ConfigureAwait(false);
            }
            if ((ans.Flags & CoordFlag.Acquired) == 0)
                throw new SemaphoreNotAcquiredException("coordination: acquire " + name + ": not acquired " + (o.Timeout == TimeSpan.Zero ? "(tried once)" : "within the timeout"));
            return A.Granted(this, name, ans.OrderId, ans.Count);
        }

        internal async Task<bool> ReleaseCoreAsync(byte[] n, string name, CancellationToken ct)
        {
            var ans = await A.DoAsync("release " + name, CoordOp.Release, new CoordBody { Name = n }, true, null, null, null, ct).ConfigureAwait(false);
            return (ans.Flags & CoordFlag.Released) != 0;
        }

        /// <summary>
        /// Describes the semaphore; with a watch option, the description's
        /// Changed task completes once at the first change after it. Every
        /// page of a long list of owners and waiters is asked for, and the
        /// pages are taken from one state of the semaphore (asked again from
        /// the first page when it changed in between).
        /// </summary>
        /// <param name="name">The semaphore's name.</param>
        /// <param name="options">What to include and watch (null: neither owners nor waiters, no watch).</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <exception cref="CoordinationException">NotFound and other refusals.</exception>
        public async Task<SemaphoreDescription> DescribeSemaphoreAsync(string name, DescribeOptions options = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            var n = Args.Name(name);
            var o = options ?? new DescribeOptions();
            byte lists = (byte)((o.Owners ? CoordFlag.Owners : 0) | (o.Waiters ? CoordFlag.Waiters : 0));
            byte watchFlags = (byte)((o.WatchData ? CoordFlag.WatchData : 0) | (o.WatchOwners ? CoordFlag.WatchOwners : 0));
            for (;;)
            {
                var d = await DescribePagesAsync(n, name, lists, watchFlags, cancellationToken).ConfigureAwait(false);
                if (d != null) return d;
            }
        }

        /// <summary>Reads every page once; null when the semaphore changed between pages.</summary>
        async Task<SemaphoreDescription> DescribePagesAsync(byte[] n, string name, byte lists, byte watchFlags, CancellationToken ct)
        {
            TaskCompletionSource<SemaphoreChange> w = null;
            Action<Frame> watch = null;
            if (watchFlags != 0)
            {
                w = new TaskCompletionSource<SemaphoreChange>(TaskCreationOptions.RunContinuationsAsynchronously);
                var wl = w;
                watch = f =>
                {
                    CoordBody c;
                    try { c = CoordCodec.Reply(f.Op, f.Code, f.Body); } catch (WireException) { c = new CoordBody(); }
                    A.RemoveWatch(wl);
                    wl.TrySetResult(new SemaphoreChange((c.Flags & CoordFlag.ChangedData) != 0, (c.Flags & CoordFlag.ChangedOwners) != 0));
                };
                A.AddWatch(w);
            }
            var what = "describe semaphore " + name;
            try
            {
                var b = await A.DoAsync(what, CoordOp.DescribeSemaphore, new CoordBody { Name = n, Flags = (byte)(lists | watchFlags) }, true, null, watch, null, ct).ConfigureAwait(false);
                var owners = Holders(b.Owners);
                var waiters = Holders(b.Queue);
                for (var page = b; (page.Flags & CoordFlag.MoreHolders) != 0;)
                {
                    // Owners' order ids are all below the waiters': the last listed is the last waiter's, or the last owner's.
                    ulong after = waiters.Count > 0 ? waiters[waiters.Count - 1].OrderId : owners.Count > 0 ? owners[owners.Count - 1].OrderId : 0;
                    page = await A.DoAsync(what, CoordOp.DescribeSemaphore, new CoordBody { Name = n, Flags = (byte)(lists | CoordFlag.NoData), After = after }, true, null, null, null, ct).ConfigureAwait(false);
                    if (page.Version != b.Version)
                    {
                        if (w != null) A.RemoveWatch(w);
                        return null;
                    }
                    if (page.Owners.Count + page.Queue.Count == 0)
                        throw new UnavailableException("coordination: " + what + ": the leader answered a page that lists nobody yet says more follow: upgrade it");
                    owners.AddRange(Holders(page.Owners));
                    waiters.AddRange(Holders(page.Queue));
                }
                return new SemaphoreDescription(name, b.Limit, b.Count, b.Data, (b.Flags & CoordFlag.Ephemeral) != 0, owners, waiters, b.Version, w != null ? w.Task : null);
            }
            catch (Exception)
            {
                // A later describe replaces the server's watch; this one is nobody's.
                if (w != null) A.RemoveWatch(w);
                throw;
            }
        }

        static List<SemaphoreHolder> Holders(List<CoordHolder> hs)
        {
            var list = new List<SemaphoreHolder>(hs.Count);
            foreach (var h in hs) list.Add(new SemaphoreHolder(h.OrderId, h.Session, h.Count, h.TimeoutMs, h.Data));
            return list;
        }

        /// <summary>A watcher of the semaphore: each NextAsync returns its description at the next change (the first: now).</summary>
        /// <param name="name">The semaphore's name.</param>
        /// <param name="options">What to include and watch (at least one of WatchData and WatchOwners).</param>
        public SemaphoreWatcher WatchSemaphore(string name, DescribeOptions options)
        {
            Args.Name(name);
            if (options == null) throw new ArgumentNullException("options");
            if (!options.WatchData && !options.WatchOwners) throw new ArgumentException("coordination: a watcher watches data, owners or both (DescribeOptions.WatchData, WatchOwners)", "options");
            return new SemaphoreWatcher(this, name, options);
        }

        /// <summary>The mutex called name on the session's node ("recipe/mutex/&lt;name&gt;", shared with the Go and Java SDKs).</summary>
        /// <param name="name">The mutex's name.</param>
        public CoordinationMutex Mutex(string name)
        {
            Args.Name(Recipe.SemaphoreName("mutex", name ?? ""));
            if (string.IsNullOrEmpty(name)) throw new ArgumentException("coordination: a mutex needs a name", "name");
            return new CoordinationMutex(this, name);
        }

        /// <summary>The election called name on the session's node ("recipe/election/&lt;name&gt;", shared with the Go and Java SDKs).</summary>
        /// <param name="name">The election's name.</param>
        public CoordinationElection Election(string name)
        {
            Args.Name(Recipe.SemaphoreName("election", name ?? ""));
            if (string.IsNullOrEmpty(name)) throw new ArgumentException("coordination: an election needs a name", "name");
            return new CoordinationElection(this, name);
        }

        /// <summary>The service called name on the session's node ("recipe/discovery/&lt;name&gt;", shared with the Go and Java SDKs).</summary>
        /// <param name="name">The service's name.</param>
        public CoordinationDiscovery Discovery(string name)
        {
            Args.Name(Recipe.SemaphoreName("discovery", name ?? ""));
            if (string.IsNullOrEmpty(name)) throw new ArgumentException("coordination: a service needs a name", "name");
            return new CoordinationDiscovery(this, name);
        }

        /// <summary>The configuration value called name on the session's node ("recipe/publication/&lt;name&gt;", shared with the Go and Java SDKs).</summary>
        /// <param name="name">The value's name.</param>
        public CoordinationPublication Publication(string name)
        {
            Args.Name(Recipe.SemaphoreName("publication", name ?? ""));
            if (string.IsNullOrEmpty(name)) throw new ArgumentException("coordination: a publication needs a name", "name");
            return new CoordinationPublication(this, name);
        }

        /// <summary>Stops the session: the server releases its holds at once; every lease's LostToken fires.</summary>
        /// <param name="cancellationToken">Ends the wait for the server's answer (the session ends on the client anyway).</param>
        public Task CloseAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return A.CloseAsync(cancellationToken);
        }

        /// <summary>Stops the session (CloseAsync bounded by 5 s); never throws.</summary>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(DisposeCoreAsync());
        }

        internal async Task DisposeCoreAsync()
        {
            using (var cts = new CancellationTokenSource(TicketBroker.ReleaseBound))
            {
                try { await A.CloseAsync(cts.Token).ConfigureAwait(false); } catch (Exception) { }
            }
        }

        /// <summary>Stops the session in the background and returns at once.</summary>
        public void Dispose()
        {
            Attachment.Forget(DisposeCoreAsync());
        }
    }

    /// <summary>What an acquire asks for.</summary>
    public sealed class AcquireOptions
    {
        /// <summary>The units asked for (1..limit; default 1, a shared hold).</summary>
        public ulong Count { get; set; } = 1;
        /// <summary>Ask for the whole limit: granted only when nothing is held (Count is then ignored).</summary>
        public bool Exclusive { get; set; }
        /// <summary>The time allowed in the queue; zero tries once; null (the default) waits until the call's token ends. The bound is absolute: an acquire sent again after a restore carries only the time left.</summary>
        public TimeSpan? Timeout { get; set; }
        /// <summary>Create the semaphore (limit 2^64-1) if missing; it is deleted when its last owner releases and nobody waits.</summary>
        public bool Ephemeral { get; set; }
        /// <summary>Data of the hold (an owner's endpoint, say), up to 1 MiB.</summary>
        public IReadOnlyList<byte> Data { get; set; }
        /// <summary>Called with the order id when the acquire is queued (again after a restore re-sent it), before the acquire returns; off the connection's reader, one callback of the session at a time.</summary>
        public Action<ulong> Queued { get; set; }
    }

    /// <summary>What a describe includes and watches.</summary>
    public sealed class DescribeOptions
    {
        /// <summary>Include the owners.</summary>
        public bool Owners { get; set; }
        /// <summary>Include the waiters.</summary>
        public bool Waiters { get; set; }
        /// <summary>Watch the data (one-shot).</summary>
        public bool WatchData { get; set; }
        /// <summary>Watch the owners (one-shot).</summary>
        public bool WatchOwners { get; set; }
    }

    /// <summary>What a watch reports, once. Both false: a notification may have been lost (the connection dropped, the session ended, or a newer watch on the same semaphore replaced this one): describe again.</summary>
    public struct SemaphoreChange
    {
        /// <summary>A change.</summary>
        /// <param name="dataChanged">The data changed.</param>
        /// <param name="ownersChanged">The owners changed.</param>
        public SemaphoreChange(bool dataChanged, bool ownersChanged) { DataChanged = dataChanged; OwnersChanged = ownersChanged; }
        /// <summary>The data changed.</summary>
        public bool DataChanged { get; }
        /// <summary>The owners changed.</summary>
        public bool OwnersChanged { get; }
    }

    /// <summary>An owner or waiter of a semaphore.</summary>
    public sealed class SemaphoreHolder
    {
        readonly byte[] data;
        internal SemaphoreHolder(ulong orderId, ulong session, ulong count, ulong timeoutMs, byte[] data)
        {
            OrderId = orderId; Session = session; Count = count; this.data = data;
            Forever = timeoutMs == CoordFlag.WaitForever;
            Timeout = Forever ? System.Threading.Timeout.InfiniteTimeSpan : TimeSpan.FromMilliseconds(Math.Min(timeoutMs, (ulong)TimeSpan.MaxValue.TotalMilliseconds / 2));
        }
        /// <summary>The hold's (or wait's) order id: its fencing token.</summary>
        public ulong OrderId { get; }
        /// <summary>The session that holds or waits.</summary>
        public ulong Session { get; }
        /// <summary>The count held or asked for.</summary>
        public ulong Count { get; }
        /// <summary>The acquire's queue timeout (InfiniteTimeSpan when Forever).</summary>
        public TimeSpan Timeout { get; }
        /// <summary>The acquire waits without a timeout.</summary>
        public bool Forever { get; }
        /// <summary>A copy of the hold's data.</summary>
        public byte[] GetData() { return (byte[])data.Clone(); }
    }

    /// <summary>A semaphore as a describe saw it, at one moment.</summary>
    public sealed class SemaphoreDescription
    {
        readonly byte[] data;
        internal SemaphoreDescription(string name, ulong limit, ulong count, byte[] data, bool ephemeral, List<SemaphoreHolder> owners, List<SemaphoreHolder> waiters, ulong version, Task<SemaphoreChange> changed)
        {
            Name = name; Limit = limit; Count = count; this.data = data; Ephemeral = ephemeral;
            Owners = new ReadOnlyCollection<SemaphoreHolder>(owners); Waiters = new ReadOnlyCollection<SemaphoreHolder>(waiters);
            Version = version; Changed = changed;
        }
        /// <summary>The semaphore's name.</summary>
        public string Name { get; }
        /// <summary>Its limit (2^64-1 for an ephemeral one).</summary>
        public ulong Limit { get; }
        /// <summary>The sum of the owners' counts.</summary>
        public ulong Count { get; }
        /// <summary>It is ephemeral.</summary>
        public bool Ephemeral { get; }
        /// <summary>Its owners by order id (empty unless asked for).</summary>
        public IReadOnlyList<SemaphoreHolder> Owners { get; }
        /// <summary>Its waiters in queue order (empty unless asked for).</summary>
        public IReadOnlyList<SemaphoreHolder> Waiters { get; }
        /// <summary>Its version: it changes whenever its data, owners or waiters change, and never repeats.</summary>
        public ulong Version { get; }
        /// <summary>With a watch: completes once, at the first change after this description (null without a watch).</summary>
        public Task<SemaphoreChange> Changed { get; }
        /// <summary>A copy of the semaphore's data.</summary>
        public byte[] GetData() { return (byte[])data.Clone(); }
    }

    /// <summary>
    /// Follows a semaphore: each NextAsync returns its description at the
    /// next change (the first call: now). A later IAsyncEnumerable face is a
    /// loop over NextAsync.
    /// </summary>
    public sealed class SemaphoreWatcher
    {
        readonly CoordinationSession session;
        readonly string name;
        readonly DescribeOptions options;
        SemaphoreDescription last;

        internal SemaphoreWatcher(CoordinationSession session, string name, DescribeOptions options)
        {
            this.session = session; this.name = name;
            this.options = new DescribeOptions { Owners = options.Owners, Waiters = options.Waiters, WatchData = options.WatchData, WatchOwners = options.WatchOwners };
        }

        /// <summary>The description after the next change (the first call: the current one). A change lost with the connection also counts: the description is read again.</summary>
        /// <param name="cancellationToken">Ends the wait.</param>
        public async Task<SemaphoreDescription> NextAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            if (last != null)
            {
                var left = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                using (cancellationToken.Register(() => left.TrySetResult(true)))
                    await Task.WhenAny(last.Changed, left.Task).ConfigureAwait(false);
                cancellationToken.ThrowIfCancellationRequested();
            }
            last = await session.DescribeSemaphoreAsync(name, options, cancellationToken).ConfigureAwait(false);
            return last;
        }
    }

    /// <summary>
    /// A hold on a semaphore. LostToken fires when the hold may be lost (the
    /// handle-lost token of .NET lock libraries): released, lost to a force
    /// delete, its session ended, or the session's conservative deadline
    /// passed. IsValid checks the deadline on the spot.
    /// </summary>
    public sealed class SemaphoreLease : IAsyncDisposable, IDisposable
    {
        readonly CoordinationSession session;
        readonly CancellationTokenSource lost;
        Exception reason;

        internal SemaphoreLease(CoordinationSession session, string name, ulong token, ulong count, CancellationToken holds)
        {
            this.session = session; Name = name; Token = token; Count = count;
            lost = CancellationTokenSource.CreateLinkedTokenSource(holds);
        }

        /// <summary>The semaphore's name.</summary>
        public string Name { get; }

        /// <summary>The hold's order id: a fencing token, strictly increasing across the service (the same counter as ticket tokens).</summary>
        public ulong Token { get; }

        /// <summary>The count held (exclusive: the semaphore's limit).</summary>
        public ulong Count { get; internal set; }

        /// <summary>Fires when the hold ends or may be lost; LossReason says why. Stop acting on the hold when it fires.</summary>
        public CancellationToken LostToken { get { return lost.Token; } }

        /// <summary>Why LostToken fired (null while it has not): DeadlinePassedException, LeaseLostException, SessionExpiredException, ClosedException, or null after a release.</summary>
        public Exception LossReason { get { return Volatile.Read(ref reason); } }

        /// <summary>The hold is still in force as far as the client can tell, checked against the session's deadline now (a process resumed after a pause sees false before any timer runs).</summary>
        public bool IsValid
        {
            get
            {
                if (lost.IsCancellationRequested) return false;
                session.A.CheckDeadline();
                return !lost.IsCancellationRequested;
            }
        }

        internal void End(Exception why)
        {
            Interlocked.CompareExchange(ref reason, why, null);
            try { lost.Cancel(); } catch (ObjectDisposedException) { }
        }

        /// <summary>Ends the hold (a release sent again after a restore if its connection was lost).</summary>
        /// <param name="cancellationToken">Ends the wait.</param>
        public async Task ReleaseAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            try
            {
                await session.ReleaseCoreAsync(Encoding.UTF8.GetBytes(Name), Name, cancellationToken).ConfigureAwait(false);
            }
            finally
            {
                session.A.ForgetLease(this);
                End(null);
            }
        }

        /// <summary>Releases the hold, bounded by 5 s; never throws.</summary>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(DisposeCoreAsync());
        }

        async Task DisposeCoreAsync()
        {
            // Ended by the server or with the session: nothing to release. A
            // hold given up at the deadline may still stand on the server (a
            // restored session keeps it): release it, unless a newer hold of
            // the same name would be released instead.
            var why = LossReason;
            if (lost.IsCancellationRequested && why != null && (!(why is DeadlinePassedException) || session.A.HasLease(Name))) return;
            using (var cts = new CancellationTokenSource(TicketBroker.ReleaseBound))
            {
                try { await ReleaseAsync(cts.Token).ConfigureAwait(false); } catch (Exception) { }
            }
        }

        /// <summary>Releases the hold in the background and returns at once.</summary>
        public void Dispose()
        {
            Attachment.Forget(DisposeCoreAsync());
        }
    }

    /// <summary>Argument checks, thrown from the call itself before anything is sent.</summary>
    internal static class Args
    {
        internal static byte[] Name(string name)
        {
            if (name == null) throw new ArgumentNullException("name");
            var b = Encoding.UTF8.GetBytes(name);
            if (b.Length < 1 || b.Length > CoordCodec.MaxName) throw new ArgumentException("coordination: a semaphore name is 1.." + CoordCodec.MaxName + " UTF-8 bytes, not " + b.Length, "name");
            return b;
        }

        internal static byte[] Path(string path)
        {
            if (path == null) throw new ArgumentNullException("path");
            var b = Encoding.UTF8.GetBytes(path);
            if (b.Length < 2 || b.Length > CoordCodec.MaxPath || path[0] != '/' || path.EndsWith("/", StringComparison.Ordinal) || path.Contains("//"))
                throw new ArgumentException("coordination: a node path is \"/\" and non-empty components, at most " + CoordCodec.MaxPath + " UTF-8 bytes (\"/svc/locks\"), not \"" + path + "\"", "path");
            return b;
        }

        internal static byte[] Data(IReadOnlyList<byte> data, string param)
        {
            if (data == null) return new byte[0];
            if (data.Count > CoordCodec.MaxData) throw new ArgumentException("coordination: data of " + data.Count + " bytes is over the limit of " + CoordCodec.MaxData + " (1 MiB)", param);
            var copy = new byte[data.Count];
            for (int i = 0; i < copy.Length; i++) copy[i] = data[i];
            return copy;
        }
    }
}
