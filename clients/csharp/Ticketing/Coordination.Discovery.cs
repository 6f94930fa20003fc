using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace Ticketing.Coordination
{
    /// <summary>One registered member of a service, as a list of the service saw it.</summary>
    public sealed class ServiceEndpoint
    {
        readonly byte[] data;
        internal ServiceEndpoint(ulong session, ulong token, byte[] data) { Session = session; Token = token; this.data = data; }
        /// <summary>The member's session.</summary>
        public ulong Session { get; }
        /// <summary>Its registration's order id.</summary>
        public ulong Token { get; }
        /// <summary>A copy of the endpoint it registered.</summary>
        public byte[] GetData() { return (byte[])data.Clone(); }

        internal bool SameAs(ServiceEndpoint o) { return Session == o.Session && Token == o.Token && data.SequenceEqual(o.data); }
    }

    /// <summary>
    /// Service discovery, shared with the Go and Java SDKs' discovery of the
    /// same name: every member registers its endpoint as its owner data on
    /// the semaphore "recipe/discovery/&lt;name&gt;" (one unit, taken with
    /// Ephemeral, so the semaphore exists while anyone is registered); lists
    /// and watchers read the owners. A registration ends with its lease:
    /// disposed, or its session ended (a crashed member is gone once its
    /// session timeout passes). A semaphore of that name that is neither
    /// ephemeral nor made by a watcher (limit 2^64-1, the marker as data) is
    /// refused with WrongKindException.
    /// </summary>
    public sealed class CoordinationDiscovery
    {
        readonly CoordinationSession s;
        readonly string sem;

        internal CoordinationDiscovery(CoordinationSession s, string name) { this.s = s; Name = name; sem = Recipe.SemaphoreName("discovery", name); }

        /// <summary>The service's name.</summary>
        public string Name { get; }

        void Check(SemaphoreDescription d)
        {
            var marker = Recipe.Marker("discovery");
            Recipe.CheckKind("discovery", d, ulong.MaxValue, b => (d.Ephemeral && b.Length == 0) || b.SequenceEqual(marker));
        }

        /// <summary>
        /// Publishes endpoint for this session until the returned lease is
        /// disposed or the session ends. Registering again replaces the
        /// endpoint (the same hold, new data).
        /// </summary>
        /// <param name="endpoint">The member's endpoint ("10.0.0.7:8080", say), up to 1 MiB.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <exception cref="WrongKindException">The service's semaphore exists but is not discovery's.</exception>
        public async Task<SemaphoreLease> RegisterAsync(byte[] endpoint, CancellationToken cancellationToken = default(CancellationToken))
        {
            Args.Data(endpoint, "endpoint");
            try
            {
                Check(await s.DescribeSemaphoreAsync(sem, null, cancellationToken).ConfigureAwait(false));
            }
            catch (NotFoundException)
            {
                // the acquire creates it
            }
            return await s.AcquireSemaphoreAsync(sem, new AcquireOptions { Ephemeral = true, Data = endpoint }, cancellationToken).ConfigureAwait(false);
        }

        /// <summary>The registered endpoints in registration (order id) order; empty when nobody is registered.</summary>
        /// <param name="cancellationToken">Ends the wait.</param>
        public async Task<IReadOnlyList<ServiceEndpoint>> ListAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            var r = await ReadAsync(false, cancellationToken).ConfigureAwait(false);
            return r.Value;
        }

        internal async Task<Watched<IReadOnlyList<ServiceEndpoint>>> ReadAsync(bool watch, CancellationToken ct)
        {
            for (;;)
            {
                SemaphoreDescription d;
                try
                {
                    d = await s.DescribeSemaphoreAsync(sem, new DescribeOptions { Owners = true, WatchOwners = watch }, ct).ConfigureAwait(false);
                }
                catch (NotFoundException)
                {
                    if (!watch) return new Watched<IReadOnlyList<ServiceEndpoint>>(new ReadOnlyCollection<ServiceEndpoint>(new List<ServiceEndpoint>()), null);
                    // Nobody is registered, so there is nothing to watch: create
                    // the semaphore as a persistent one that registrations join
                    // (their Ephemeral only creates a missing one), and watch it.
                    try { await s.CreateSemaphoreAsync(sem, ulong.MaxValue, Recipe.Marker("discovery"), ct).ConfigureAwait(false); }
                    catch (AlreadyExistsException) { }
                    catch (IndeterminateException) { }
                    continue;
                }
                Check(d);
                var list = d.Owners.Select(o => new ServiceEndpoint(o.Session, o.OrderId, o.GetData())).ToList();
                return new Watched<IReadOnlyList<ServiceEndpoint>>(new ReadOnlyCollection<ServiceEndpoint>(list), d.Changed);
            }
        }

        /// <summary>
        /// A watcher of the service's members: each NextAsync returns the
        /// endpoints when they differ from the last ones returned (the first
        /// call: now). To watch a service nobody has registered yet it creates
        /// the service's semaphore as a persistent one, which stays after the
        /// members leave.
        /// </summary>
        public Watcher<IReadOnlyList<ServiceEndpoint>> Watch()
        {
            return new Watcher<IReadOnlyList<ServiceEndpoint>>(ReadAsync, (a, b) => a.Count == b.Count && a.Zip(b, (x, y) => x.SameAs(y)).All(same => same));
        }
    }

    /// <summary>
    /// Configuration publication, shared with the Go and Java SDKs'
    /// publication of the same name: one value (any bytes) kept in the data
    /// of the persistent semaphore "recipe/publication/&lt;name&gt;" (limit 1)
    /// after the marker "ticketing-recipe:publication" and "=", published by
    /// PublishAsync and followed by GetAsync and Watch through data watches.
    /// The marker alone means unset (a watcher creates it so), so an empty
    /// value is told from none. A semaphore of that name with another limit
    /// or data is refused with WrongKindException.
    /// </summary>
    public sealed class CoordinationPublication
    {
        readonly CoordinationSession s;
        readonly string sem;

        internal CoordinationPublication(CoordinationSession s, string name) { this.s = s; Name = name; sem = Recipe.SemaphoreName("publication", name); }

        /// <summary>The value's name.</summary>
        public string Name { get; }

        static byte[] DataOf(byte[] value)
        {
            var m = Recipe.Marker("publication");
            var d = new byte[m.Length + 1 + value.Length];
            Buffer.BlockCopy(m, 0, d, 0, m.Length);
            d[m.Length] = (byte)'=';
            Buffer.BlockCopy(value, 0, d, m.Length + 1, value.Length);
            return d;
        }

        /// <summary>The published value in d (null: unset); WrongKindException when d is not a publication's.</summary>
        static byte[] ValueOf(SemaphoreDescription d)
        {
            var m = Recipe.Marker("publication");
            var data = d.GetData();
            Func<byte[], bool> marked = b => b.Length >= m.Length && b.Take(m.Length).SequenceEqual(m) && (b.Length == m.Length || b[m.Length] == (byte)'=');
            Recipe.CheckKind("publication", d, 1, marked);
            if (data.Length == m.Length) return null;
            return data.Skip(m.Length + 1).ToArray();
        }

        /// <summary>
        /// Sets the value, creating its semaphore if missing. Publishing the
        /// same value twice is harmless, so an update whose answer was lost
        /// with the connection is sent again after the session is restored.
        /// </summary>
        /// <param name="value">The value (empty is a value; null is refused), up to 1 MiB with the marker.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <exception cref="WrongKindException">The semaphore exists but is not a publication's.</exception>
        public async Task PublishAsync(byte[] value, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (value == null) throw new ArgumentNullException("value");
            var data = DataOf(value);
            Args.Data(data, "value");
            for (;;)
            {
                SemaphoreDescription d;
                try
                {
                    d = await s.DescribeSemaphoreAsync(sem, null, cancellationToken).ConfigureAwait(false);
                }
                catch (NotFoundException)
                {
                    try
                    {
                        await s.CreateSemaphoreAsync(sem, 1, data, cancellationToken).ConfigureAwait(false);
                        return;
                    }
                    catch (AlreadyExistsException) { continue; } // created meanwhile: check it and set the value
                    catch (IndeterminateException) { continue; } // maybe by us: check it and set the value
                }
                ValueOf(d);
                try
                {
                    await s.UpdateSemaphoreAsync(sem, data, cancellationToken).ConfigureAwait(false);
                    return;
                }
                catch (IndeterminateException) { } // idempotent: set it again
                catch (NotFoundException) { }      // deleted meanwhile: create it again
            }
        }

        /// <summary>The value (an empty array for an empty value).</summary>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <exception cref="NotFoundException">It was never published (or its semaphore exists unset, as a watcher creates it).</exception>
        public async Task<byte[]> GetAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            var v = ValueOf(await s.DescribeSemaphoreAsync(sem, null, cancellationToken).ConfigureAwait(false));
            if (v == null) throw new NotFoundException("coordination: publication " + sem + " is not set");
            return v;
        }

        internal async Task<Watched<byte[]>> ReadAsync(bool watch, CancellationToken ct)
        {
            for (;;)
            {
                try
                {
                    var d = await s.DescribeSemaphoreAsync(sem, new DescribeOptions { WatchData = watch }, ct).ConfigureAwait(false);
                    return new Watched<byte[]>(ValueOf(d), d.Changed);
                }
                catch (NotFoundException)
                {
                    // Not yet published: create it unset, so that it can be watched.
                    try { await s.CreateSemaphoreAsync(sem, 1, Recipe.Marker("publication"), ct).ConfigureAwait(false); }
                    catch (AlreadyExistsException) { }
                    catch (IndeterminateException) { }
                }
            }
        }

        /// <summary>
        /// A watcher of the value: each NextAsync returns it when it differs
        /// from the last one returned (the first call: now); null means unset,
        /// an empty array an empty value. A value not yet published has its
        /// semaphore created unset, so that it can be watched.
        /// </summary>
        public Watcher<byte[]> Watch()
        {
            return new Watcher<byte[]>(ReadAsync, (a, b) => a == null ? b == null : b != null && a.SequenceEqual(b));
        }
    }

    /// <summary>A value read with a one-shot watch: the value, and the task that completes at the next change.</summary>
    internal struct Watched<T>
    {
        internal Watched(T value, Task<SemaphoreChange> changed) { Value = value; Changed = changed; }
        internal readonly T Value;
        internal readonly Task<SemaphoreChange> Changed;
    }

    /// <summary>
    /// Follows a recipe's value (an election's leader, a service's members, a
    /// published configuration value): each NextAsync returns the value when
    /// it differs from the last one returned; the first call returns the
    /// current one. It reads again after every watch notification, including
    /// the empty one of a lost connection. Call NextAsync from one caller at a
    /// time. A later IAsyncEnumerable face is a loop over NextAsync.
    /// </summary>
    /// <typeparam name="T">What is followed.</typeparam>
    public sealed class Watcher<T>
    {
        /// <summary>How long a watcher waits before reading again after an error that a restore may end.</summary>
        static readonly TimeSpan Pause = TimeSpan.FromMilliseconds(100);

        readonly Func<bool, CancellationToken, Task<Watched<T>>> read;
        readonly Func<T, T, bool> same;
        bool first = true;
        T last;
        Task<SemaphoreChange> changed;

        internal Watcher(Func<bool, CancellationToken, Task<Watched<T>>> read, Func<T, T, bool> same) { this.read = read; this.same = same; }

        /// <summary>The value once it differs from the last one returned (the first call: the current value).</summary>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <exception cref="SessionExpiredException">The session ended (also ClosedException).</exception>
        /// <exception cref="WrongKindException">The recipe's semaphore is not of its kind.</exception>
        public async Task<T> NextAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            for (;;)
            {
                if (changed != null)
                {
                    var left = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                    using (cancellationToken.Register(() => left.TrySetResult(true)))
                        await Task.WhenAny(changed, left.Task).ConfigureAwait(false);
                    cancellationToken.ThrowIfCancellationRequested();
                    changed = null;
                }
                Watched<T> w;
                try
                {
                    w = await read(true, cancellationToken).ConfigureAwait(false);
                }
                catch (Exception e) when (e is UnavailableException || e is IndeterminateException || e is CapacityException || e is DeadlinePassedException)
                {
                    // The session is restoring, say: read again shortly.
                    await Task.Delay(Pause, cancellationToken).ConfigureAwait(false);
                    continue;
                }
                changed = w.Changed;
                if (first || !same(w.Value, last))
                {
                    first = false;
                    last = w.Value;
                    return w.Value;
                }
            }
        }
    }
}
