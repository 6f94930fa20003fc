using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Ticketing.Wire;

namespace Ticketing.Coordination
{
    /// <summary>How a node's reads are served.</summary>
    public enum ReadMode : byte
    {
        /// <summary>Unchanged (an alter) or the default (a create): Relaxed.</summary>
        Default = 0,
        /// <summary>Reads may be served without a fresh commit.</summary>
        Relaxed = 1,
        /// <summary>Reads follow a commit.</summary>
        Strict = 2,
    }

    /// <summary>How a node's sessions are attached.</summary>
    public enum AttachMode : byte
    {
        /// <summary>Unchanged (an alter) or the default (a create): Strict.</summary>
        Default = 0,
        /// <summary>A restore must give the session's protection key.</summary>
        Strict = 1,
        /// <summary>Relaxed attach.</summary>
        Relaxed = 2,
    }

    /// <summary>A node's configuration; zero fields take the default in a create and stay unchanged in an alter.</summary>
    public sealed class NodeSettings
    {
        /// <summary>The self-check period (default 1 s).</summary>
        public TimeSpan SelfCheckPeriod { get; set; }
        /// <summary>The session grace period (default 10 s), longer than the self-check period: how long a new leader keeps a detached session beyond its timeout.</summary>
        public TimeSpan SessionGracePeriod { get; set; }
        /// <summary>The read mode.</summary>
        public ReadMode ReadMode { get; set; }
        /// <summary>The attach mode.</summary>
        public AttachMode AttachMode { get; set; }
        /// <summary>The most sessions (0: default 10000 / unchanged).</summary>
        public uint MaxSessions { get; set; }
        /// <summary>The most semaphores (0: default 10000 / unchanged).</summary>
        public uint MaxSemaphores { get; set; }
        /// <summary>The most waiters over the node's semaphores (0: default 10000 / unchanged).</summary>
        public uint MaxWaiters { get; set; }
    }

    /// <summary>A node's configuration and sizes.</summary>
    public sealed class NodeDescription
    {
        internal NodeDescription(CoordBody b)
        {
            Settings = new NodeSettings
            {
                SelfCheckPeriod = TimeSpan.FromMilliseconds(b.SelfCheckMs), SessionGracePeriod = TimeSpan.FromMilliseconds(b.GraceMs),
                ReadMode = (ReadMode)b.ReadMode, AttachMode = (AttachMode)b.AttachMode,
                MaxSessions = b.MaxSessions, MaxSemaphores = b.MaxSemaphores, MaxWaiters = b.MaxWaiters,
            };
            Sessions = b.SessionCount; Semaphores = b.SemaphoreCount; Waiters = b.WaiterCount;
        }
        /// <summary>The node's configuration.</summary>
        public NodeSettings Settings { get; }
        /// <summary>Sessions of the node.</summary>
        public uint Sessions { get; }
        /// <summary>Semaphores of the node.</summary>
        public uint Semaphores { get; }
        /// <summary>Queued acquires over the node's semaphores.</summary>
        public uint Waiters { get; }
    }

    /// <summary>A session of a node, as ListSessionsAsync saw it.</summary>
    public sealed class SessionInfo
    {
        internal SessionInfo(ulong id, ulong seqNo, ulong timeoutMs, bool attached, string description)
        {
            Id = id; SeqNo = seqNo; Timeout = TimeSpan.FromMilliseconds(timeoutMs); Attached = attached; Description = description;
        }
        /// <summary>The session's id.</summary>
        public ulong Id { get; }
        /// <summary>Its attach sequence number.</summary>
        public ulong SeqNo { get; }
        /// <summary>Its timeout.</summary>
        public TimeSpan Timeout { get; }
        /// <summary>It has a connection now (else it is detached, its expiry clock running).</summary>
        public bool Attached { get; }
        /// <summary>Its description.</summary>
        public string Description { get; }
    }

    /// <summary>
    /// Coordination nodes, sessions and semaphores (docs/coordination.md) on a
    /// TicketBroker's connection: the sessions share the connection of the
    /// broker's tickets when the server carries many sessions on one
    /// connection, and use a connection each with an older server. The
    /// client does not own the broker; disposing it ends its sessions.
    /// </summary>
    public sealed class CoordinationClient : IAsyncDisposable, IDisposable
    {
        readonly TicketBroker broker;
        readonly object mu = new object();
        readonly HashSet<CoordinationSession> sessions = new HashSet<CoordinationSession>();
        bool closed;

        /// <summary>A client over the broker's connection.</summary>
        /// <param name="broker">The broker (kept open by its owner; closing it ends the sessions' connections).</param>
        public CoordinationClient(TicketBroker broker)
        {
            if (broker == null) throw new ArgumentNullException("broker");
            this.broker = broker;
        }

        /// <summary>Starts a session on the node at path.</summary>
        /// <param name="path">The node's path.</param>
        /// <param name="options">Timeout, description, state handler (null: the defaults).</param>
        /// <param name="cancellationToken">Ends the wait for a connection and the attach (a session the server created meanwhile is stopped).</param>
        /// <exception cref="CoordinationException">The server refused the attach (NotFound: no such node).</exception>
        /// <exception cref="UnavailableException">No connection, or it was lost before the answer.</exception>
        public async Task<CoordinationSession> StartSessionAsync(string path, SessionOptions options = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            Args.Path(path);
            var o = options ?? new SessionOptions();
            if (o.Timeout < SessionOptions.MinTimeout || o.Timeout > SessionOptions.MaxTimeout)
                throw new ArgumentOutOfRangeException("options", "coordination: session timeout " + o.Timeout + " is outside " + SessionOptions.MinTimeout + ".." + SessionOptions.MaxTimeout + " (SessionOptions.Timeout)");
            if (System.Text.Encoding.UTF8.GetByteCount(o.Description ?? "") > CoordCodec.MaxDesc)
                throw new ArgumentException("coordination: a session description is at most " + CoordCodec.MaxDesc + " UTF-8 bytes (SessionOptions.Description)", "options");
            CoordinationSession s = null;
            var a = new Attachment(broker, path, o.Timeout, o.Description, o.StateChanged, _ => { lock (mu) sessions.Remove(s); });
            s = new CoordinationSession(a);
            lock (mu)
            {
                if (closed) throw new ClosedException("coordination: start session on " + path + ": the coordination client is closed");
                sessions.Add(s);
            }
            try
            {
                await a.StartAsync(cancellationToken).ConfigureAwait(false);
            }
            catch (Exception)
            {
                lock (mu) sessions.Remove(s);
                throw;
            }
            return s;
        }

        /// <summary>Creates a coordination node.</summary>
        /// <param name="path">The node's path ("/svc/locks").</param>
        /// <param name="settings">Its configuration (null: every default).</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        /// <exception cref="CoordinationException">AlreadyExists, BadRequest, Unauthorized.</exception>
        public Task CreateNodeAsync(string path, NodeSettings settings = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            return NodeCallAsync("create node " + path, CoordOp.CreateNode, NodeBody(path, settings), false, cancellationToken);
        }

        /// <summary>Changes the given (non-zero) fields of a node's configuration.</summary>
        /// <param name="path">The node's path.</param>
        /// <param name="settings">The fields to change.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        public Task AlterNodeAsync(string path, NodeSettings settings, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (settings == null) throw new ArgumentNullException("settings");
            return NodeCallAsync("alter node " + path, CoordOp.AlterNode, NodeBody(path, settings), false, cancellationToken);
        }

        /// <summary>Drops a node; its sessions end.</summary>
        /// <param name="path">The node's path.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        public Task DropNodeAsync(string path, CancellationToken cancellationToken = default(CancellationToken))
        {
            return NodeCallAsync("drop node " + path, CoordOp.DropNode, new CoordBody { Path = Args.Path(path) }, false, cancellationToken);
        }

        /// <summary>A node's configuration and sizes.</summary>
        /// <param name="path">The node's path.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        public async Task<NodeDescription> DescribeNodeAsync(string path, CancellationToken cancellationToken = default(CancellationToken))
        {
            var b = await NodeCallAsync("describe node " + path, CoordOp.DescribeNode, new CoordBody { Path = Args.Path(path) }, true, cancellationToken).ConfigureAwait(false);
            return new NodeDescription(b);
        }

        /// <summary>The node's sessions by id (every page of the server's answer).</summary>
        /// <param name="path">The node's path.</param>
        /// <param name="cancellationToken">Ends the wait.</param>
        public async Task<IReadOnlyList<SessionInfo>> ListSessionsAsync(string path, CancellationToken cancellationToken = default(CancellationToken))
        {
            var p = Args.Path(path);
            var all = new List<SessionInfo>();
            ulong after = 0;
            for (;;)
            {
                var b = await NodeCallAsync("list sessions of " + path, CoordOp.ListSessions, new CoordBody { Path = p, After = after }, true, cancellationToken).ConfigureAwait(false);
                foreach (var x in b.Sessions) all.Add(new SessionInfo(x.Session, x.SeqNo, x.TimeoutMs, (x.Flags & 1) != 0, System.Text.Encoding.UTF8.GetString(x.Desc)));
                if ((b.Flags & 1) == 0) return all.AsReadOnly();
                if (b.Sessions.Count == 0)
                    throw new UnavailableException("coordination: list sessions of " + path + ": the leader answered a page that lists nobody yet says more follow: upgrade it");
                after = b.Sessions[b.Sessions.Count - 1].Session;
            }
        }

        static CoordBody NodeBody(string path, NodeSettings s)
        {
            var p = Args.Path(path);
            s = s ?? new NodeSettings();
            return new CoordBody
            {
                Path = p, SelfCheckMs = Ms(s.SelfCheckPeriod, "settings"), GraceMs = Ms(s.SessionGracePeriod, "settings"),
                ReadMode = (byte)s.ReadMode, AttachMode = (byte)s.AttachMode,
                MaxSessions = s.MaxSessions, MaxSemaphores = s.MaxSemaphores, MaxWaiters = s.MaxWaiters,
            };
        }

        static uint Ms(TimeSpan t, string param)
        {
            if (t < TimeSpan.Zero || t.TotalMilliseconds > uint.MaxValue) throw new ArgumentOutOfRangeException(param, "coordination: a node's period " + t + " is outside 0.." + uint.MaxValue + " ms");
            return (uint)Math.Ceiling(t.TotalMilliseconds);
        }

        /// <summary>
        /// A node request on the broker's connection: a read is sent again
        /// after a lost connection, a change is not (IndeterminateException).
        /// Without a cancellable token the broker's operation timeout bounds it.
        /// </summary>
        async Task<CoordBody> NodeCallAsync(string what, byte op, CoordBody body, bool read, CancellationToken ct)
        {
            using (var bound = ct.CanBeCanceled || broker.Cfg.OperationTimeout == Timeout.InfiniteTimeSpan ? null : new CancellationTokenSource(broker.Cfg.OperationTimeout))
            {
                var t = bound != null ? bound.Token : ct;
                try
                {
                    return await NodeCallCoreAsync(what, op, body, read, t).ConfigureAwait(false);
                }
                catch (OperationCanceledException e) when (bound != null && bound.IsCancellationRequested)
                {
                    throw read ? (Exception)new UnavailableException("coordination: " + what + ": no answer within the operation timeout (" + broker.Cfg.OperationTimeout + ")", e)
                        : new IndeterminateException("coordination: " + what + ": no answer within the operation timeout (" + broker.Cfg.OperationTimeout + "); it may or may not have taken effect", e);
                }
            }
        }

        async Task<CoordBody> NodeCallCoreAsync(string what, byte op, CoordBody body, bool read, CancellationToken ct)
        {
            for (int attempt = 0; ; attempt++)
            {
                Connection c;
                try
                {
                    c = await broker.GetConnAsync(ct, false).ConfigureAwait(false);
                }
                catch (Exception e) when (!(e is OperationCanceledException) || !ct.IsCancellationRequested)
                {
                    throw Connector.ConnectError("coordination: " + what, null, e, ct, true);
                }
                var r = await c.CoordCallAsync(op, CoordCodec.Request(op, body, false), false, false, null, null, ct, CancellationToken.None).ConfigureAwait(false);
                if (r.NotSent || (r.Lost && read && attempt < 2)) continue;
                if (r.Lost)
                    throw read ? (Exception)new UnavailableException("coordination: " + what + ": the connection was lost before the answer")
                        : new IndeterminateException("coordination: " + what + ": the connection was lost before the answer; it may or may not have taken effect");
                if (r.F.Type == FrameType.Capacity)
                    throw new CapacityException("coordination: " + what + ": capacity (" + (CapacityReason)r.F.Reason + "); retry later with backoff", (CapacityReason)r.F.Reason);
                CoordBody ans;
                try { ans = CoordCodec.Reply(r.F.Op, r.F.Code, r.F.Body); }
                catch (WireException e) { throw new UnavailableException("coordination: " + what + ": " + e.Message, e); }
                var err = CoordinationException.FromStatus(what, r.F.Code, ans.Message);
                if (err != null) throw err;
                return ans;
            }
        }

        /// <summary>Stops every session of this client (each bounded by 5 s); the broker stays open.</summary>
        public ValueTask DisposeAsync()
        {
            return new ValueTask(DisposeCoreAsync());
        }

        async Task DisposeCoreAsync()
        {
            List<CoordinationSession> all;
            lock (mu) { closed = true; all = new List<CoordinationSession>(sessions); }
            var tasks = new List<Task>();
            foreach (var s in all) tasks.Add(s.DisposeCoreAsync());
            await Task.WhenAll(tasks).ConfigureAwait(false);
        }

        /// <summary>Stops every session in the background and returns at once.</summary>
        public void Dispose()
        {
            Attachment.Forget(DisposeCoreAsync());
        }
    }
}
