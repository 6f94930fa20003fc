using System;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Ticketing.Coordination
{
    /// <summary>
    /// A semaphore that exists under a recipe's name but was not created by
    /// that kind of recipe (another limit or data): it is refused rather than
    /// used as one.
    /// </summary>
    public sealed class WrongKindException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public WrongKindException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public WrongKindException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public WrongKindException(string message, Exception innerException) : base(message, innerException) { }
    }

    // Recipes own their semaphores, in the name spaces and with the markers
    // of the Go SDK (coordination/recipes.go), so that Go, Java and C#
    // processes share them: kind's semaphore called name is
    // "recipe/<kind>/<name>", created with limit 1 and the data
    // "ticketing-recipe:<kind>"; one that exists otherwise is refused.
    internal static class Recipe
    {
        internal static string SemaphoreName(string kind, string name) { return "recipe/" + kind + "/" + name; }

        internal static byte[] Marker(string kind) { return Encoding.UTF8.GetBytes("ticketing-recipe:" + kind); }

        internal static void CheckKind(string kind, SemaphoreDescription d)
        {
            CheckKind(kind, d, 1, b => b.SequenceEqual(Marker(kind)));
        }

        /// <summary>Throws WrongKindException unless d has kind's limit and data that marked accepts.</summary>
        internal static void CheckKind(string kind, SemaphoreDescription d, ulong limit, Func<byte[], bool> marked)
        {
            if (d.Limit == limit && marked(d.GetData())) return;
            throw new WrongKindException("coordination: semaphore \"" + d.Name + "\" (limit " + d.Limit + ", " + d.GetData().Length +
                " bytes of data) was not created by a " + kind + " of this library: refusing to use it as one");
        }

        /// <summary>Creates kind's semaphore unless it exists, and checks that an existing one is kind's.</summary>
        internal static async Task EnsureAsync(CoordinationSession s, string kind, string sem, CancellationToken ct)
        {
            for (;;)
            {
                try
                {
                    await s.CreateSemaphoreAsync(sem, 1, Marker(kind), ct).ConfigureAwait(false);
                    return;
                }
                catch (CoordinationException e) when (e.Status == CoordinationStatus.AlreadyExists) { }
                catch (IndeterminateException) { }
                SemaphoreDescription d;
                try
                {
                    d = await s.DescribeSemaphoreAsync(sem, null, ct).ConfigureAwait(false);
                }
                catch (CoordinationException e) when (e.Status == CoordinationStatus.NotFound)
                {
                    continue; // deleted meanwhile (or the create was lost): again
                }
                CheckKind(kind, d);
                return;
            }
        }

        /// <summary>Takes kind's semaphore (created if missing, checked once per handle).</summary>
        internal static async Task<SemaphoreLease> AcquireOneAsync(CoordinationSession s, string kind, string sem, Func<bool> isChecked, Action setChecked, AcquireOptions o, CancellationToken ct)
        {
            for (;;)
            {
                if (!isChecked())
                {
                    await EnsureAsync(s, kind, sem, ct).ConfigureAwait(false);
                    setChecked();
                }
                try
                {
                    return await s.AcquireSemaphoreAsync(sem, o, ct).ConfigureAwait(false);
                }
                catch (CoordinationException e) when (e.Status == CoordinationStatus.NotFound)
                {
                    // deleted meanwhile: create it again
                }
            }
        }
    }

    /// <summary>
    /// A lock held by a session: the persistent semaphore
    /// "recipe/mutex/&lt;name&gt;" with limit 1, shared with the Go and Java
    /// SDKs' mutex of that name. The lease's Token fences the work; its
    /// LostToken fires when the lock may be lost.
    /// </summary>
    public sealed class CoordinationMutex
    {
        readonly CoordinationSession s;
        readonly string sem;
        volatile bool checkedKind;

        internal CoordinationMutex(CoordinationSession s, string name) { this.s = s; Name = name; sem = Recipe.SemaphoreName("mutex", name); }

        /// <summary>The mutex's name.</summary>
        public string Name { get; }

        /// <summary>Waits for the lock until the token ends. Dispose the lease (await using) to unlock.</summary>
        /// <param name="cancellationToken">Ends the wait (the wait is withdrawn).</param>
        /// <exception cref="WrongKindException">The semaphore exists but is not a mutex's.</exception>
        public Task<SemaphoreLease> AcquireAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return Recipe.AcquireOneAsync(s, "mutex", sem, () => checkedKind, () => checkedKind = true, new AcquireOptions(), cancellationToken);
        }

        /// <summary>Takes the lock if it is free now; null when another session holds it.</summary>
        /// <param name="cancellationToken">Ends the wait for the answer.</param>
        public async Task<SemaphoreLease> TryAcquireAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            try
            {
                return await Recipe.AcquireOneAsync(s, "mutex", sem, () => checkedKind, () => checkedKind = true, new AcquireOptions { Timeout = TimeSpan.Zero }, cancellationToken).ConfigureAwait(false);
            }
            catch (SemaphoreNotAcquiredException)
            {
                return null;
            }
        }
    }

    /// <summary>An election's leader as a describe saw it.</summary>
    public sealed class LeaderInfo
    {
        readonly byte[] data;
        internal LeaderInfo(ulong session, ulong token, byte[] data) { Session = session; Token = token; this.data = data; }
        /// <summary>The leader's session; 0 when nobody leads.</summary>
        public ulong Session { get; }
        /// <summary>The leadership's fencing token (its hold's order id).</summary>
        public ulong Token { get; }
        /// <summary>A copy of the data the leader published.</summary>
        public byte[] GetData() { return (byte[])data.Clone(); }
    }

    /// <summary>
    /// One leader among sessions: the persistent semaphore
    /// "recipe/election/&lt;name&gt;" with limit 1 whose owner leads, with its
    /// data; shared with the Go and Java SDKs' election of that name.
    /// </summary>
    public sealed class CoordinationElection
    {
        readonly CoordinationSession s;
        readonly string sem;
        volatile bool checkedKind;

        internal CoordinationElection(CoordinationSession s, string name) { this.s = s; Name = name; sem = Recipe.SemaphoreName("election", name); }

        /// <summary>The election's name.</summary>
        public string Name { get; }

        /// <summary>
        /// Waits until this session leads, publishing data (its address, say)
        /// as the leader's. The lease is the leadership: its Token is the
        /// leader's fencing token, to pass with every write the leader makes;
        /// its LostToken fires when leadership may be lost; disposing it
        /// resigns.
        /// </summary>
        /// <param name="data">The leader's data (null: none).</param>
        /// <param name="cancellationToken">Ends the campaign (it is withdrawn).</param>
        public Task<SemaphoreLease> CampaignAsync(byte[] data, CancellationToken cancellationToken = default(CancellationToken))
        {
            return Recipe.AcquireOneAsync(s, "election", sem, () => checkedKind, () => checkedKind = true, new AcquireOptions { Data = data }, cancellationToken);
        }

        /// <summary>The current leader (Session 0 when nobody leads).</summary>
        /// <param name="cancellationToken">Ends the wait.</param>
        public async Task<LeaderInfo> GetLeaderAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            var r = await ReadLeaderAsync(false, cancellationToken).ConfigureAwait(false);
            return r.Value;
        }

        async Task<Watched<LeaderInfo>> ReadLeaderAsync(bool watch, CancellationToken ct)
        {
            for (;;)
            {
                SemaphoreDescription d;
                try
                {
                    d = await s.DescribeSemaphoreAsync(sem, new DescribeOptions { Owners = true, WatchOwners = watch, WatchData = watch }, ct).ConfigureAwait(false);
                }
                catch (NotFoundException)
                {
                    await Recipe.EnsureAsync(s, "election", sem, ct).ConfigureAwait(false);
                    continue;
                }
                Recipe.CheckKind("election", d);
                if (d.Owners.Count == 0) return new Watched<LeaderInfo>(new LeaderInfo(0, 0, new byte[0]), d.Changed);
                var o = d.Owners[0];
                return new Watched<LeaderInfo>(new LeaderInfo(o.Session, o.OrderId, o.GetData()), d.Changed);
            }
        }

        /// <summary>
        /// A watcher of the leader: each NextAsync returns the leader when it
        /// changed (another session, token or data; Session 0 when nobody
        /// leads), the first call the current one.
        /// </summary>
        public Watcher<LeaderInfo> Observe()
        {
            return new Watcher<LeaderInfo>(ReadLeaderAsync, (a, b) => a.Session == b.Session && a.Token == b.Token && a.GetData().SequenceEqual(b.GetData()));
        }
    }
}
