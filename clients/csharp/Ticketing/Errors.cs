using System;
using System.Collections.Generic;
using System.Collections.ObjectModel;
using System.Diagnostics.CodeAnalysis;

namespace Ticketing
{
    /// <summary>Which server limit a B frame hit (docs/protocol.md, "Capacity reasons of B").</summary>
    public enum CapacityReason : byte
    {
        /// <summary>The server holds as many tickets as it allows.</summary>
        Held = 1,
        /// <summary>The key's queue is full.</summary>
        KeyWaiters = 2,
        /// <summary>The server has as many waiting acquires as it allows.</summary>
        Waiters = 3,
        /// <summary>The connection has as many requests in flight as the server allows.</summary>
        InFlight = 4,
        /// <summary>The server has as many client connections as it allows.</summary>
        Connections = 5,
        /// <summary>The principal's quota of connections (the connection was refused).</summary>
        PrincipalConnections = 6,
        /// <summary>The principal's quota of held tickets.</summary>
        PrincipalHeld = 7,
        /// <summary>The principal's quota of queued acquires.</summary>
        PrincipalWaiters = 8,
        /// <summary>The principal's quota of requests in flight over all its connections.</summary>
        PrincipalInFlight = 9,
        /// <summary>The principal's quota of requests per second.</summary>
        PrincipalRate = 10,
    }

    /// <summary>Why the server refused a request with F (docs/protocol.md, "Refusal reasons of F").</summary>
    public enum PermissionReason : byte
    {
        /// <summary>The principal's role does not allow the request.</summary>
        Role = 1,
        /// <summary>The key is outside the principal's key prefixes.</summary>
        Key = 2,
        /// <summary>The ticket to release was granted to another principal.</summary>
        Owner = 3,
    }

    /// <summary>The stable numeric code of a server E frame (docs/protocol.md, "Error codes").</summary>
    public enum ErrorCode : ushort
    {
        /// <summary>A frame the server could not decode.</summary>
        MalformedFrame = 1,
        /// <summary>A frame over the size limit.</summary>
        FrameTooLarge = 2,
        /// <summary>A frame type the server does not know.</summary>
        UnknownFrame = 3,
        /// <summary>A protocol version the server does not speak.</summary>
        UnsupportedVersion = 4,
        /// <summary>The client token was refused.</summary>
        Unauthenticated = 5,
        /// <summary>A request came before the hello.</summary>
        HelloRequired = 6,
        /// <summary>No hello in time.</summary>
        HelloTimeout = 7,
        /// <summary>A request with an out-of-range field.</summary>
        InvalidArgument = 8,
        /// <summary>The client did not answer pings.</summary>
        PingTimeout = 9,
        /// <summary>The client read its answers too slowly.</summary>
        SlowConsumer = 10,
        /// <summary>The server is stopping.</summary>
        ShuttingDown = 11,
        /// <summary>An internal server error.</summary>
        Internal = 12,
        /// <summary>A request id already in flight.</summary>
        DuplicateId = 13,
        /// <summary>A request the server does not allow on this connection.</summary>
        NotAllowed = 14,
    }

    /// <summary>
    /// The retry class of a failure, for a transaction-retry layer: the Go
    /// retry package's classes, in its order (retry/class.go; RetryClassName
    /// gives the Go name). This client's exceptions report the class the Go
    /// client's errors report (TicketingException.RetryClass).
    /// </summary>
    public enum RetryClass
    {
        /// <summary>Unknown or permanent: never retried.</summary>
        NonRetryable,
        /// <summary>Transaction conflict or deadlock: always retried, fast backoff.</summary>
        Aborted,
        /// <summary>Server shutting down or starting up, a refused dial: always retried, fast backoff.</summary>
        Unavailable,
        /// <summary>A server capacity limit: always retried, slow backoff.</summary>
        Overloaded,
        /// <summary>Too many connections: always retried, slow backoff.</summary>
        ClientResourceExhausted,
        /// <summary>The session must be recreated: always retried, at once.</summary>
        BadSession,
        /// <summary>Outcome unknown: retried only for idempotent work, fast backoff.</summary>
        Undetermined,
        /// <summary>The connection could not be used: retried only for idempotent work, fast backoff.</summary>
        TransportUnavailable,
        /// <summary>The connection broke mid-call: retried only for idempotent work, fast backoff.</summary>
        ClientTransportError,
        /// <summary>The session expired mid-call: retried only for idempotent work, at once.</summary>
        SessionExpired,
        /// <summary>Deadline exceeded: never retried.</summary>
        Timeout,
        /// <summary>Cancelled: never retried.</summary>
        Canceled,
        /// <summary>A stale or already committed fencing token: never retried.</summary>
        PreconditionFailed,
        /// <summary>Not found: never retried.</summary>
        NotFound,
        /// <summary>An invalid argument: never retried.</summary>
        InvalidArgument,
    }

    /// <summary>The Go retry package's rules for RetryClass.</summary>
    public static class RetryClasses
    {
        /// <summary>
        /// The retry class of any exception a call of this library throws:
        /// a TicketingException's own RetryClass, InvalidArgument for an
        /// ArgumentException, Canceled for an OperationCanceledException,
        /// NonRetryable for anything else.
        /// </summary>
        /// <param name="exception">The exception a call threw.</param>
        /// <returns>Its retry class.</returns>
        /// <exception cref="ArgumentNullException">exception is null.</exception>
        public static RetryClass Of(Exception exception)
        {
            if (exception == null) throw new ArgumentNullException("exception");
            var te = exception as TicketingException;
            if (te != null) return te.RetryClass;
            if (exception is ArgumentException) return RetryClass.InvalidArgument;
            if (exception is OperationCanceledException) return RetryClass.Canceled;
            return RetryClass.NonRetryable;
        }

        /// <summary>The Go name of a class (ABORTED, TRANSPORT_UNAVAILABLE, ...).</summary>
        /// <param name="c">The class.</param>
        /// <returns>Its name in the Go retry package.</returns>
        public static string RetryClassName(this RetryClass c)
        {
            var sb = new System.Text.StringBuilder();
            foreach (var ch in c.ToString())
            {
                if (char.IsUpper(ch) && sb.Length > 0) sb.Append('_');
                sb.Append(char.ToUpperInvariant(ch));
            }
            return sb.ToString();
        }

        /// <summary>Whether a failure of class c is retried; idempotent work is also retried when the outcome is unknown.</summary>
        /// <param name="c">The class.</param>
        /// <param name="idempotent">Whether the work may safely run twice.</param>
        /// <returns>True when the Go retry package retries it.</returns>
        public static bool Retryable(this RetryClass c, bool idempotent)
        {
            switch (c)
            {
                case RetryClass.Aborted:
                case RetryClass.Unavailable:
                case RetryClass.Overloaded:
                case RetryClass.ClientResourceExhausted:
                case RetryClass.BadSession:
                    return true;
                case RetryClass.Undetermined:
                case RetryClass.TransportUnavailable:
                case RetryClass.ClientTransportError:
                case RetryClass.SessionExpired:
                    return idempotent;
            }
            return false;
        }
    }

    /// <summary>
    /// Base of every exception this library throws for an outcome of a call
    /// (cancellation is the standard OperationCanceledException, a usage
    /// error an ArgumentException). Catch the subclasses to tell the
    /// outcomes apart; the message says what happened and what to do.
    /// </summary>
    public class TicketingException : Exception
    {
        /// <summary>The server (host:port) that answered or was tried, when known; otherwise null.</summary>
        [MaybeNull]
        public string Address { get; internal set; }
        /// <summary>The former name of Address.</summary>
        [MaybeNull]
        [Obsolete("Renamed Address (.NET naming guidelines); Addr will be removed in a later version.")]
        public string Addr { get { return Address; } }
        /// <summary>The code of the server's E frame, when the session ended with one.</summary>
        public ErrorCode? ServerCode { get; internal set; }

        /// <summary>An exception with a default message.</summary>
        public TicketingException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public TicketingException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public TicketingException(string message, Exception innerException) : base(message, innerException) { }

        /// <summary>
        /// How a transaction-retry layer should treat this failure, as the Go
        /// client's errors report it: capacity rejects Overloaded, unknown
        /// outcomes Undetermined (NonRetryable when the broker was closed),
        /// unusable connections TransportUnavailable; everything else (not
        /// acquired, not held, budget exceeded, unauthenticated, permission
        /// denied, closed) NonRetryable. RetryClasses.Of also classifies
        /// argument errors and cancellations.
        /// </summary>
        public virtual RetryClass RetryClass { get { return RetryClass.NonRetryable; } }
    }

    /// <summary>The key was not granted within the wait (W), or the acquire was withdrawn (X): the only ordinary "no".</summary>
    public sealed class NotAcquiredException : TicketingException
    {
        /// <summary>An exception with a default message.</summary>
        public NotAcquiredException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public NotAcquiredException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public NotAcquiredException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// The server rejected the request for one of its capacity limits (B). It
    /// is final and thrown at once; the client does not retry it. A caller may
    /// start a new acquire (a new owner) after its own backoff.
    /// </summary>
    public sealed class CapacityException : TicketingException
    {
        /// <summary>Overloaded.</summary>
        public override RetryClass RetryClass { get { return RetryClass.Overloaded; } }
        /// <summary>Which limit the request hit.</summary>
        public CapacityReason Reason { get; private set; }
        /// <summary>An exception with a default message.</summary>
        public CapacityException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public CapacityException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public CapacityException(string message, Exception innerException) : base(message, innerException) { }
        /// <summary>An exception for a B frame.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="reason">Which limit the request hit.</param>
        public CapacityException(string message, CapacityReason reason) : base(message) { Reason = reason; }
    }

    /// <summary>
    /// The request may have reached the server but its final answer was lost
    /// (the connection dropped or went silent, the session ended with M or E,
    /// the server sent an invalid frame, the broker was closed, or no answer
    /// came in time). For an acquire the ticket may or may not have been
    /// granted: do not enter the critical section. An acquire is never re-sent
    /// automatically, except after a stopping server's E 11: it is then sent
    /// again with the same owner on the next connection (this exception then
    /// means it could not be).
    /// </summary>
    public sealed class IndeterminateException : TicketingException
    {
        /// <summary>Undetermined; NonRetryable when the broker was closed.</summary>
        public override RetryClass RetryClass { get { return BrokerClosed ? RetryClass.NonRetryable : RetryClass.Undetermined; } }
        /// <summary>True when the cause was the broker being closed.</summary>
        public bool BrokerClosed { get; internal set; }
        /// <summary>The key of the request (for an acquire: of the acquire), when known; otherwise null.</summary>
        [MaybeNull]
        public string Key { get; internal set; }
        /// <summary>
        /// For an acquire: the 16 random owner bytes it sent (KeyDescription.Owner
        /// shows them if it holds the key). When the acquire's connection ended
        /// before its final answer, the broker itself asks the leader, once
        /// reconnected, to end whatever this owner holds or waits for on the key
        /// (release by owner, U), so an orphaned grant is freed within a
        /// reconnect rather than at the end of its lease. Null otherwise.
        /// </summary>
        [MaybeNull]
        public IReadOnlyList<byte> Owner { get { return owner; } }
        internal byte[] OwnerBytes { set { owner = value == null ? null : new ReadOnlyCollection<byte>((byte[])value.Clone()); } }
        ReadOnlyCollection<byte> owner;
        /// <summary>An exception with a default message.</summary>
        public IndeterminateException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public IndeterminateException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public IndeterminateException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// A release found the key free or held under another token (N): the
    /// ticket had already ended. When the release had to be sent again because
    /// the first attempt's answer was lost, the subclass
    /// NotHeldAfterRetryException is thrown instead.
    /// </summary>
    public class NotHeldException : TicketingException
    {
        /// <summary>An exception with a default message.</summary>
        public NotHeldException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public NotHeldException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public NotHeldException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// A release whose first answer was lost (the connection ended after it
    /// was sent) was sent again with the same token and answered N. The hold
    /// has ended, but the earlier attempt may be what ended it, so unlike a
    /// plain NotHeldException this does not mean the ticket had already
    /// expired or been released before. It is a NotHeldException, so a
    /// catch (NotHeldException) also catches it; catch this class first to
    /// tell the two apart (the Go client's ErrNotHeldAfterRetry).
    /// </summary>
    public sealed class NotHeldAfterRetryException : NotHeldException
    {
        /// <summary>An exception with a default message.</summary>
        public NotHeldAfterRetryException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public NotHeldAfterRetryException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public NotHeldAfterRetryException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// The ticket was granted, but so late that its conservative remaining
    /// time is below the work budget (or not positive). The client releases it
    /// in the background; do not enter the critical section.
    /// </summary>
    public sealed class BudgetExceededException : TicketingException
    {
        /// <summary>The token that was granted (and is being released).</summary>
        public ulong Token { get; private set; }
        /// <summary>An exception with a default message.</summary>
        public BudgetExceededException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public BudgetExceededException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public BudgetExceededException(string message, Exception innerException) : base(message, innerException) { }
        /// <summary>An exception for a grant that came too late for its budget.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="token">The token that was granted.</param>
        public BudgetExceededException(string message, ulong token) : base(message) { Token = token; }
    }

    /// <summary>
    /// The server refused the hello's token (E code 5), or refused the client
    /// certificate. Calls made while the refusal persists throw it promptly;
    /// the broker keeps retrying in the background with backoff.
    /// </summary>
    public sealed class UnauthenticatedException : TicketingException
    {
        /// <summary>An exception with a default message.</summary>
        public UnauthenticatedException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public UnauthenticatedException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public UnauthenticatedException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// The server refused the request because this client's principal may not
    /// make it (F): its role does not allow it, the key is outside its key
    /// prefixes, or the ticket to release was granted to another principal.
    /// It is final and nothing happened; the connection stays open and every
    /// other request goes on. The same request is refused again until the
    /// server's configuration changes, so it is never retried.
    /// </summary>
    public sealed class PermissionDeniedException : TicketingException
    {
        /// <summary>The F frame's reason (another value may come from a newer server).</summary>
        public PermissionReason Reason { get; private set; }
        /// <summary>The reason in words, as in the message.</summary>
        public string ReasonText { get { return ReasonName(Reason); } }
        /// <summary>An exception with a default message.</summary>
        public PermissionDeniedException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public PermissionDeniedException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public PermissionDeniedException(string message, Exception innerException) : base(message, innerException) { }
        /// <summary>An exception for an F frame.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="reason">The F frame's reason.</param>
        public PermissionDeniedException(string message, PermissionReason reason) : base(message) { Reason = reason; }

        /// <summary>A refusal reason in words (the Go client's wording).</summary>
        /// <param name="reason">The reason.</param>
        /// <returns>The reason in words.</returns>
        public static string ReasonName(PermissionReason reason)
        {
            switch (reason)
            {
                case PermissionReason.Role: return "the client's role does not allow this request (an admin token is needed for admin operations)";
                case PermissionReason.Key: return "the key is outside the key prefixes the client may use";
                case PermissionReason.Owner: return "the ticket was granted to another principal";
            }
            return "refusal reason " + (byte)reason;
        }
    }

    /// <summary>
    /// No usable connection to the cluster leader: none could be made in
    /// time (the operation timeout, the caller's wait), the server refuses the
    /// connection, or, for a request without an effect (describe), the
    /// connection was lost before the answer. Requests that may have had an
    /// effect throw IndeterminateException instead.
    /// </summary>
    public class UnavailableException : TicketingException
    {
        /// <summary>TransportUnavailable.</summary>
        public override RetryClass RetryClass { get { return RetryClass.TransportUnavailable; } }
        /// <summary>An exception with a default message.</summary>
        public UnavailableException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public UnavailableException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public UnavailableException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// A server belongs to another cluster than the one this client is pinned
    /// to: the cluster of the first server it reached, or the one given to
    /// TicketBrokerBuilder.ClusterId. The client never uses such a server and
    /// keeps trying the other addresses; calls throw this at once when every
    /// listed server is refused so, and when their wait for a connection ends
    /// while only servers of another cluster answered. A cluster restored from
    /// a snapshot has a new ID: give the clients the new one or restart them.
    /// </summary>
    public sealed class WrongClusterException : UnavailableException
    {
        /// <summary>The cluster this client is pinned to (32 hex digits).</summary>
        public string PinnedClusterId { get; private set; }
        /// <summary>The refused server's cluster (32 hex digits), or "none" when it has none yet (a cluster still forming).</summary>
        public string ServerClusterId { get; private set; }
        /// <summary>An exception with a default message.</summary>
        public WrongClusterException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public WrongClusterException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public WrongClusterException(string message, Exception innerException) : base(message, innerException)
        {
            var w = innerException as WrongClusterException;
            if (w != null)
            {
                PinnedClusterId = w.PinnedClusterId;
                ServerClusterId = w.ServerClusterId;
                Address = w.Address;
            }
        }
        internal WrongClusterException(string message, string pinned, string server) : base(message)
        {
            PinnedClusterId = pinned;
            ServerClusterId = server;
        }
    }

    /// <summary>The broker was closed (disposed) before the call could be sent.</summary>
    public sealed class ClosedException : TicketingException
    {
        /// <summary>An exception with a default message.</summary>
        public ClosedException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public ClosedException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public ClosedException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// A background release (Ticket.Dispose) could not be queued because the
    /// release queue was full; the ticket stays held until its lease expires.
    /// Reported to the release observer.
    /// </summary>
    public sealed class ReleaseDroppedException : TicketingException
    {
        /// <summary>An exception with a default message.</summary>
        public ReleaseDroppedException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public ReleaseDroppedException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public ReleaseDroppedException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>The content of a server E frame: it ended the session with a stable code.</summary>
    public sealed class ServerErrorException : TicketingException
    {
        /// <summary>The E frame's code.</summary>
        public ErrorCode Code { get; private set; }
        /// <summary>The E frame's text; empty when it had none.</summary>
        public string ServerMessage { get; private set; }
        /// <summary>An exception with a default message.</summary>
        public ServerErrorException() { ServerMessage = ""; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public ServerErrorException(string message) : base(message) { ServerMessage = ""; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public ServerErrorException(string message, Exception innerException) : base(message, innerException) { ServerMessage = ""; }
        /// <summary>An exception for an E frame.</summary>
        /// <param name="address">The server (host:port).</param>
        /// <param name="code">The E frame's code.</param>
        /// <param name="serverMessage">The E frame's text.</param>
        public ServerErrorException(string address, ErrorCode code, string serverMessage)
            : base("the server " + address + " ended the session with error " + code + " (code " + (ushort)code + "): " + serverMessage)
        {
            Address = address; Code = code; ServerMessage = serverMessage ?? ""; ServerCode = code;
        }
    }

    /// <summary>The server is not the leader (M), naming the leader's client address when it knows it.</summary>
    public sealed class NotLeaderException : TicketingException
    {
        /// <summary>The leader's client address (host:port); empty when the server did not know it.</summary>
        public string LeaderAddress { get; private set; }
        /// <summary>The former name of LeaderAddress.</summary>
        [Obsolete("Renamed LeaderAddress (.NET naming guidelines); LeaderAddr will be removed in a later version.")]
        public string LeaderAddr { get { return LeaderAddress; } }
        /// <summary>An exception with a default message.</summary>
        public NotLeaderException() { LeaderAddress = ""; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public NotLeaderException(string message) : base(message) { LeaderAddress = ""; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public NotLeaderException(string message, Exception innerException) : base(message, innerException) { LeaderAddress = ""; }
        /// <summary>An exception for an M frame.</summary>
        /// <param name="address">The server that answered M.</param>
        /// <param name="leaderAddress">The leader it named; empty when it did not know it.</param>
        public NotLeaderException(string address, string leaderAddress)
            : base(!string.IsNullOrEmpty(leaderAddress)
                ? "the server " + address + " is not the leader (the leader is " + leaderAddress + ")"
                : "the server " + address + " is not the leader and does not know the leader")
        {
            Address = address; LeaderAddress = leaderAddress ?? "";
        }
    }
}
