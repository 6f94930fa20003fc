using System;
using System.Collections.Generic;
using System.Diagnostics.CodeAnalysis;
using System.Text;
using System.Threading;

namespace Ticketing
{
    internal sealed class Config
    {
        internal string[] Addrs;
        internal byte[] Token = new byte[0];
        internal TlsSettings Tls;
        internal TlsMode TlsMode = TlsMode.Off;
        internal TimeSpan DialTimeout = TicketBroker.DefaultDialTimeout;
        internal TimeSpan OperationTimeout = TicketBroker.DefaultOperationTimeout;
        internal int ReleaseQueue = TicketBroker.DefaultReleaseQueue;
        internal int ReleaseWorkers = TicketBroker.ReleaseWorkers;
        internal TimeSpan ReleaseBound = TicketBroker.ReleaseBound;
        internal Action<string, ulong, Exception> Observer;
        internal Action<string, byte[], Exception> OwnerObserver; // tests: outcomes of releases by owner
        // Close gives cancelled acquires' late grants and queued background
        // releases up to their own release bound (as the Go client does),
        // not a fixed second that a loaded machine can overrun.
        internal TimeSpan DrainTimeout = TicketBroker.ReleaseBound;
        internal TimeSpan BackoffBase = TimeSpan.FromMilliseconds(25);
        internal TimeSpan BackoffMax = TimeSpan.FromMilliseconds(500);
        internal TimeSpan OwnPingInterval = TimeSpan.FromMilliseconds(500);
        internal TimeSpan MinAnswerGrace = TimeSpan.FromSeconds(10);
        internal TimeSpan AnswerGraceOverride; // tests only; zero = none
        internal byte[] ClusterId; // the builder's ClusterId, or null
        internal ClusterPin Pin; // the cluster this broker serves (set by Connect)
    }

    /// <summary>
    /// Builds a TicketBroker:
    /// TicketBroker.CreateBuilder().Addresses(...).Token(...).Tls(...).Connect().
    /// Every option is optional except the addresses.
    /// </summary>
    public sealed class TicketBrokerBuilder
    {
        readonly Config cfg = new Config();
        readonly List<string> addresses = new List<string>();

        internal TicketBrokerBuilder() { }

        /// <summary>Adds server addresses (host:port); each argument may itself be a comma-separated list.</summary>
        /// <param name="addresses">host:port strings, IPv6 hosts in brackets ([::1]:5225).</param>
        /// <returns>This builder.</returns>
        /// <exception cref="ArgumentNullException">addresses or one of its items is null.</exception>
        /// <exception cref="ArgumentException">An item is empty or not host:port.</exception>
        public TicketBrokerBuilder Addresses(params string[] addresses)
        {
            if (addresses == null) throw new ArgumentNullException("addresses");
            foreach (var a in addresses)
            {
                if (a == null) throw new ArgumentNullException("addresses", "ticketing: an address is null");
                this.addresses.AddRange(TicketBroker.ParseAddresses(a));
            }
            return this;
        }

        /// <summary>The former name of Addresses: adds server addresses (host:port).</summary>
        /// <param name="addrs">host:port strings, each possibly a comma-separated list.</param>
        /// <returns>This builder.</returns>
        [Obsolete("Renamed Addresses (.NET naming guidelines); Addrs will be removed in a later version.")]
        public TicketBrokerBuilder Addrs(params string[] addrs) { return Addresses(addrs); }

        /// <summary>The client token sent in the hello; it must match one of the server's client_tokens.</summary>
        /// <param name="token">At most 1024 UTF-8 bytes; null or empty sends none.</param>
        /// <returns>This builder.</returns>
        /// <exception cref="ArgumentException">token is over 1024 bytes.</exception>
        public TicketBrokerBuilder Token([AllowNull] string token)
        {
            var bytes = Encoding.UTF8.GetBytes(token ?? "");
            if (bytes.Length > Wire.Codec.MaxToken)
                throw new ArgumentException("ticketing: the token is " + bytes.Length + " bytes; at most " + Wire.Codec.MaxToken + " are allowed", "token");
            cfg.Token = bytes;
            return this;
        }

        /// <summary>The TLS mode: TlsMode.Off (default), SystemRoots, Ca(file) or InsecureSkipVerify.</summary>
        /// <param name="mode">The mode; null is Off.</param>
        /// <returns>This builder.</returns>
        public TicketBrokerBuilder Tls([AllowNull] TlsMode mode) { cfg.TlsMode = mode ?? TlsMode.Off; return this; }

        /// <summary>Bounds one connection attempt: TCP, TLS and hello (default 5 s, TicketBroker.DefaultDialTimeout).</summary>
        /// <param name="timeout">Positive.</param>
        /// <returns>This builder.</returns>
        /// <exception cref="ArgumentOutOfRangeException">timeout is zero or negative.</exception>
        public TicketBrokerBuilder DialTimeout(TimeSpan timeout)
        {
            if (timeout <= TimeSpan.Zero)
                throw new ArgumentOutOfRangeException("timeout", timeout, "ticketing: the dial timeout must be positive");
            cfg.DialTimeout = timeout;
            return this;
        }

        /// <summary>
        /// Bounds every call (the default 10 s,
        /// TicketBroker.DefaultOperationTimeout), in the manner of
        /// HttpClient.Timeout: waiting for a connection, for a free request
        /// slot and for the answer all count. An acquire gets its wait on top
        /// (time in the key's queue is the caller's choice). Ended before
        /// anything was sent: UnavailableException; after an acquire may have
        /// been sent: IndeterminateException (a cancel is sent and a late grant
        /// released, as for a cancellation); a describe: UnavailableException.
        /// Releases keep their own bound (ReleaseBound). A call given a
        /// cancellation token ends at the timeout or when the token ends,
        /// whichever comes first: a token ends a call sooner, never later
        /// (a request's token that is never cancelled, such as ASP.NET's
        /// RequestAborted, leaves the bound in force).
        /// Timeout.InfiniteTimeSpan turns the bound off.
        /// </summary>
        /// <param name="timeout">Positive, or Timeout.InfiniteTimeSpan.</param>
        /// <returns>This builder.</returns>
        /// <exception cref="ArgumentOutOfRangeException">timeout is zero or negative (other than Timeout.InfiniteTimeSpan).</exception>
        public TicketBrokerBuilder OperationTimeout(TimeSpan timeout)
        {
            if (timeout <= TimeSpan.Zero && timeout != Timeout.InfiniteTimeSpan)
                throw new ArgumentOutOfRangeException("timeout", timeout, "ticketing: the operation timeout must be positive, or Timeout.InfiniteTimeSpan");
            cfg.OperationTimeout = timeout;
            return this;
        }

        /// <summary>Capacity of the background release queue used by Ticket.Dispose (default 1024, TicketBroker.DefaultReleaseQueue).</summary>
        /// <param name="capacity">At least 1.</param>
        /// <returns>This builder.</returns>
        /// <exception cref="ArgumentOutOfRangeException">capacity is below 1.</exception>
        public TicketBrokerBuilder ReleaseQueue(int capacity)
        {
            if (capacity < 1)
                throw new ArgumentOutOfRangeException("capacity", capacity, "ticketing: the release queue must hold at least 1 release");
            cfg.ReleaseQueue = capacity;
            return this;
        }

        /// <summary>
        /// Called with the outcome of every background release (Ticket.Dispose
        /// and DisposeAsync, and the compensating releases of late grants):
        /// null for R, NotHeldException for N, ReleaseDroppedException when
        /// the queue was full, another exception when no final answer came
        /// within ReleaseBound. Runs on the client's own threads and must not
        /// block. Failures also raise TicketBroker.ReleaseFailed.
        /// </summary>
        /// <param name="observer">Called with the key, the token and the failure (null for success); null for none.</param>
        /// <returns>This builder.</returns>
        public TicketBrokerBuilder ReleaseObserver([AllowNull] Action<string, ulong, Exception> observer) { cfg.Observer = observer; return this; }

        /// <summary>
        /// Pins the broker to the cluster with this ID (32 hex digits, as
        /// ticketctl status prints cluster_id) from the start, instead of to
        /// the cluster of the first server it reaches. A server of another
        /// cluster is refused (WrongClusterException). After the cluster has
        /// been restored from a snapshot (which gives it a new ID), give the new
        /// ID, or restart clients that pinned the old one without this option.
        /// </summary>
        /// <param name="clusterId">The cluster's ID.</param>
        /// <returns>This builder.</returns>
        /// <exception cref="ArgumentException">clusterId is not 32 hex digits (or is all zero).</exception>
        public TicketBrokerBuilder ClusterId(string clusterId)
        {
            if (clusterId == null) throw new ArgumentNullException("clusterId");
            var id = ClusterPin.Parse(clusterId);
            if (id == null)
                throw new ArgumentException("ticketing: cluster ID \"" + clusterId + "\" is not a cluster ID: it is " + 2 * Wire.Codec.ClusterIdLen +
                    " hex digits, not all zero, as ticketctl status prints it (cluster_id)", "clusterId");
            cfg.ClusterId = id;
            return this;
        }

        // Knobs for the tests: shorter timings, same code paths.
        internal TicketBrokerBuilder ReleaseBoundForTests(TimeSpan d) { cfg.ReleaseBound = d; return this; }
        internal TicketBrokerBuilder DrainForTests(TimeSpan d) { cfg.DrainTimeout = d; return this; }
        internal TicketBrokerBuilder WorkersForTests(int n) { cfg.ReleaseWorkers = n; return this; }
        internal TicketBrokerBuilder OwnPingForTests(TimeSpan d) { cfg.OwnPingInterval = d; return this; }
        internal TicketBrokerBuilder AnswerGraceForTests(TimeSpan d) { cfg.AnswerGraceOverride = d; return this; }
        internal TicketBrokerBuilder OwnerObserverForTests(Action<string, byte[], Exception> o) { cfg.OwnerObserver = o; return this; }
        internal TicketBrokerBuilder BackoffForTests(TimeSpan b, TimeSpan max) { cfg.BackoffBase = b; cfg.BackoffMax = max; return this; }

        /// <summary>
        /// Builds the broker. It returns at once and connects in the
        /// background; use WaitReadyAsync. The TLS mode's files are read here.
        /// </summary>
        /// <returns>The broker; dispose it when the application ends.</returns>
        /// <exception cref="InvalidOperationException">No address was given, or a client certificate was added to TlsMode.Off.</exception>
        /// <exception cref="ArgumentException">A CA or client certificate file cannot be read (ParamName names the TlsMode parameter: caFile, pkcs12File, certFile).</exception>
        public TicketBroker Connect()
        {
            if (addresses.Count == 0) throw new InvalidOperationException("ticketing: no server address given (Addresses(\"host:port\", ...))");
            cfg.Addrs = addresses.ToArray();
            cfg.Tls = cfg.TlsMode.Build();
            cfg.Pin = new ClusterPin(cfg.ClusterId);
            return new TicketBroker(cfg);
        }
    }
}
