using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Text;
using System.Threading;

[assembly: InternalsVisibleTo("Ticketing.Tests")]

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
    }

    /// <summary>
    /// Builds a TicketBroker: TicketBroker.CreateBuilder().Addrs(...).Token(...).Tls(...).Connect().
    /// Every option is optional except the addresses.
    /// </summary>
    public sealed class TicketBrokerBuilder
    {
        readonly Config cfg = new Config();
        readonly List<string> addrs = new List<string>();
        string token = "";

        internal TicketBrokerBuilder() { }

        /// <summary>Server addresses (host:port); each argument may itself be a comma-separated list.</summary>
        public TicketBrokerBuilder Addrs(params string[] addrs)
        {
            foreach (var a in addrs ?? new string[0]) this.addrs.AddRange(TicketBroker.ParseAddrs(a));
            return this;
        }

        /// <summary>The client token sent in the hello; it must match one of the server's client_tokens (at most 1024 bytes).</summary>
        public TicketBrokerBuilder Token(string token) { this.token = token ?? ""; return this; }

        /// <summary>The TLS mode: TlsMode.Off (default), SystemRoots, Ca(file) or InsecureSkipVerify.</summary>
        public TicketBrokerBuilder Tls(TlsMode mode) { cfg.TlsMode = mode ?? TlsMode.Off; return this; }

        /// <summary>Bounds one connection attempt: TCP, TLS and hello (default 5 s).</summary>
        public TicketBrokerBuilder DialTimeout(TimeSpan d) { cfg.DialTimeout = d; return this; }

        /// <summary>
        /// Bounds every call made without a cancellation token (the default
        /// 10 s, TicketBroker.DefaultOperationTimeout), in the manner of
        /// HttpClient.Timeout: waiting for a connection, for a free request
        /// slot and for the answer all count. An acquire gets its wait on top
        /// (time in the key's queue is the caller's choice). Ended before
        /// anything was sent: UnavailableException; after an acquire may have
        /// been sent: IndeterminateException (a cancel is sent and a late grant
        /// released, as for a cancellation); a describe: UnavailableException.
        /// Releases keep their own bound (ReleaseBound). A call given a
        /// cancellable token is bounded by that token alone.
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

        /// <summary>Capacity of the background release queue used by Ticket.Dispose (default 1024).</summary>
        public TicketBrokerBuilder ReleaseQueue(int n) { cfg.ReleaseQueue = n; return this; }

        /// <summary>
        /// Called with the outcome of every background release (Ticket.Dispose,
        /// and the compensating releases of late grants): null for R,
        /// NotHeldException for N, ReleaseDroppedException when the queue was
        /// full, another exception when no final answer came within
        /// ReleaseBound. Runs on the client's own threads and must not block.
        /// </summary>
        public TicketBrokerBuilder ReleaseObserver(Action<string, ulong, Exception> observer) { cfg.Observer = observer; return this; }

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
        /// background; use WaitReadyAsync. Throws InvalidArgumentException
        /// only for a bad configuration (no or malformed address, unreadable
        /// CA or client certificate file, token over 1024 bytes).
        /// </summary>
        public TicketBroker Connect()
        {
            if (addrs.Count == 0) throw new InvalidArgumentException("ticketing: no server address given (Addrs(\"host:port\", ...))");
            cfg.Addrs = addrs.ToArray();
            cfg.Token = Encoding.UTF8.GetBytes(token);
            if (cfg.Token.Length > Wire.Codec.MaxToken)
                throw new InvalidArgumentException("ticketing: the token is " + cfg.Token.Length + " bytes; at most 1024 are allowed");
            if (cfg.DialTimeout <= TimeSpan.Zero) cfg.DialTimeout = TicketBroker.DefaultDialTimeout;
            if (cfg.ReleaseQueue < 1) throw new InvalidArgumentException("ticketing: the release queue must hold at least 1 release");
            cfg.Tls = cfg.TlsMode.Build();
            return new TicketBroker(cfg);
        }
    }
}
