using System;

namespace Ticketing
{
    /// <summary>Which server limit a B frame hit (docs/protocol.md, "Capacity reasons of B").</summary>
    public enum CapacityReason : byte
    {
        Held = 1,
        KeyWaiters = 2,
        Waiters = 3,
        InFlight = 4,
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
        MalformedFrame = 1,
        FrameTooLarge = 2,
        UnknownFrame = 3,
        UnsupportedVersion = 4,
        Unauthenticated = 5,
        HelloRequired = 6,
        HelloTimeout = 7,
        InvalidArgument = 8,
        PingTimeout = 9,
        SlowConsumer = 10,
        ShuttingDown = 11,
        Internal = 12,
        DuplicateId = 13,
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
        /// <summary>The Go name of c (ABORTED, TRANSPORT_UNAVAILABLE, ...).</summary>
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
    /// (cancellation is the standard OperationCanceledException). Catch the
    /// subclasses to tell the outcomes apart; the message says what happened
    /// and what to do.
    /// </summary>
    public class TicketingException : Exception
    {
        /// <summary>The server that answered or was tried, when known.</summary>
        public string Addr { get; internal set; }
        /// <summary>The code of the server's E frame, when the session ended with one.</summary>
        public ErrorCode? ServerCode { get; internal set; }

        public TicketingException(string message) : base(message) { }
        public TicketingException(string message, Exception inner) : base(message, inner) { }

        /// <summary>
        /// How a transaction-retry layer should treat this failure, as the Go
        /// client's errors report it: capacity rejects Overloaded, unknown
        /// outcomes Undetermined (NonRetryable when the broker was closed),
        /// unusable connections TransportUnavailable, invalid arguments
        /// InvalidArgument; everything else (not acquired, not held, budget
        /// exceeded, unauthenticated, permission denied, closed) NonRetryable.
        /// </summary>
        public virtual RetryClass RetryClass { get { return RetryClass.NonRetryable; } }
    }

    /// <summary>
    /// An argument is out of range (wait, lease, budget, key length, token 0,
    /// configuration). Nothing was sent; the same call always fails again.
    /// </summary>
    public sealed class InvalidArgumentException : TicketingException
    {
        public override RetryClass RetryClass { get { return RetryClass.InvalidArgument; } }
        public InvalidArgumentException(string message) : base(message) { }
        public InvalidArgumentException(string message, Exception inner) : base(message, inner) { }
    }

    /// <summary>The key was not granted within the wait (W), or the acquire was withdrawn (X): the only ordinary "no".</summary>
    public sealed class NotAcquiredException : TicketingException
    {
        public NotAcquiredException(string message) : base(message) { }
    }

    /// <summary>
    /// The server rejected the request for one of its capacity limits (B). It
    /// is final and thrown at once; the client does not retry it. A caller may
    /// start a new acquire (a new owner) after its own backoff.
    /// </summary>
    public sealed class CapacityException : TicketingException
    {
        public override RetryClass RetryClass { get { return RetryClass.Overloaded; } }
        public CapacityReason Reason { get; private set; }
        public CapacityException(string message, CapacityReason reason) : base(message) { Reason = reason; }
    }

    /// <summary>
    /// The request may have reached the server but its final answer was lost
    /// (the connection dropped or went silent, the session ended with M or E,
    /// the server sent an invalid frame, the broker was closed, or no answer
    /// came in time). For an acquire the ticket may or may not have been
    /// granted: do not enter the critical section. An acquire is never re-sent
    /// automatically.
    /// </summary>
    public sealed class IndeterminateException : TicketingException
    {
        public override RetryClass RetryClass { get { return BrokerClosed ? RetryClass.NonRetryable : RetryClass.Undetermined; } }
        /// <summary>True when the cause was the broker being closed.</summary>
        public bool BrokerClosed { get; internal set; }
        /// <summary>The key of the request (for an acquire: of the acquire).</summary>
        public string Key { get; internal set; }
        /// <summary>
        /// For an acquire: the 16 random owner bytes it sent (KeyDescription.Owner
        /// shows them if it holds the key). When the acquire's connection ended
        /// before its final answer, the broker itself asks the leader, once
        /// reconnected, to end whatever this owner holds or waits for on the key
        /// (release by owner, U), so an orphaned grant is freed within a
        /// reconnect rather than at the end of its lease. Null otherwise.
        /// </summary>
        public byte[] Owner { get; internal set; }
        public IndeterminateException(string message, Exception inner) : base(message, inner) { }
    }

    /// <summary>
    /// A release found the key free or held under another token (N): the
    /// ticket had already ended. When the release had to be sent again because
    /// the first attempt's answer was lost, the subclass
    /// NotHeldAfterRetryException is thrown instead.
    /// </summary>
    public class NotHeldException : TicketingException
    {
        public NotHeldException(string message) : base(message) { }
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
        public NotHeldAfterRetryException(string message) : base(message) { }
    }

    /// <summary>
    /// The ticket was granted, but so late that its conservative remaining
    /// time is below the work budget (or not positive). The client releases it
    /// in the background; do not enter the critical section.
    /// </summary>
    public sealed class BudgetExceededException : TicketingException
    {
        public ulong Token { get; private set; }
        public BudgetExceededException(string message, ulong token) : base(message) { Token = token; }
    }

    /// <summary>
    /// The server refused the hello's token (E code 5), or refused the client
    /// certificate. Calls made while the refusal persists throw it promptly;
    /// the broker keeps retrying in the background with backoff.
    /// </summary>
    public sealed class UnauthenticatedException : TicketingException
    {
        public UnauthenticatedException(string message, Exception inner) : base(message, inner) { }
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
        public PermissionDeniedException(string message, PermissionReason reason) : base(message) { Reason = reason; }

        /// <summary>A refusal reason in words (the Go client's wording).</summary>
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
    /// time, the server refuses the connection, or, for a request without an
    /// effect (describe), the connection was lost before the answer. Requests
    /// that may have had an effect throw IndeterminateException instead.
    /// </summary>
    public sealed class UnavailableException : TicketingException
    {
        public override RetryClass RetryClass { get { return RetryClass.TransportUnavailable; } }
        public UnavailableException(string message, Exception inner) : base(message, inner) { }
    }

    /// <summary>The broker was closed (disposed) before the call could be sent.</summary>
    public sealed class ClosedException : TicketingException
    {
        public ClosedException(string message) : base(message) { }
    }

    /// <summary>
    /// A background release (Ticket.Dispose) could not be queued because the
    /// release queue was full; the ticket stays held until its lease expires.
    /// Reported to the release observer.
    /// </summary>
    public sealed class ReleaseDroppedException : TicketingException
    {
        public ReleaseDroppedException(string message) : base(message) { }
    }

    /// <summary>The content of a server E frame: it ended the session with a stable code.</summary>
    public sealed class ServerErrorException : TicketingException
    {
        public ErrorCode Code { get; private set; }
        public string ServerMessage { get; private set; }
        public ServerErrorException(string addr, ErrorCode code, string serverMessage)
            : base("the server " + addr + " ended the session with error " + code + " (code " + (ushort)code + "): " + serverMessage)
        {
            Addr = addr; Code = code; ServerMessage = serverMessage; ServerCode = code;
        }
    }

    /// <summary>The server is not the leader (M), naming the leader's client address when it knows it.</summary>
    public sealed class NotLeaderException : TicketingException
    {
        public string LeaderAddr { get; private set; }
        public NotLeaderException(string addr, string leaderAddr)
            : base(leaderAddr.Length > 0
                ? "the server " + addr + " is not the leader (the leader is " + leaderAddr + ")"
                : "the server " + addr + " is not the leader and does not know the leader")
        {
            Addr = addr; LeaderAddr = leaderAddr;
        }
    }
}
