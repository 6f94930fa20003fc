using System;

namespace Ticketing.Coordination
{
    /// <summary>The status of a coordination answer (docs/protocol.md, "Coordination frames"; meanings in docs/coordination.md).</summary>
    public enum CoordinationStatus : ushort
    {
        /// <summary>Done.</summary>
        Success = 0,
        /// <summary>The node, semaphore or session does not exist.</summary>
        NotFound = 1,
        /// <summary>The node or semaphore exists already.</summary>
        AlreadyExists = 2,
        /// <summary>A field is out of range or malformed: the same request always fails.</summary>
        BadRequest = 3,
        /// <summary>The request does not fit the current state (a semaphore in use, a limit below the count held).</summary>
        PreconditionFailed = 4,
        /// <summary>A wait was ended (its semaphore deleted with force, or a newer request replaced it).</summary>
        Aborted = 5,
        /// <summary>The session ended on the server.</summary>
        SessionExpired = 6,
        /// <summary>The session is not this connection's, or an attach lost to a higher sequence number.</summary>
        BadSession = 7,
        /// <summary>The principal may not make this request.</summary>
        Unauthorized = 8,
        /// <summary>A limit of the node (sessions, semaphores, waiters) or a principal's quota was reached.</summary>
        LimitExceeded = 9,
    }

    /// <summary>
    /// A coordination request refused by the server with a status (Status), or
    /// a coordination outcome of the client's (the subclasses). Statuses that
    /// a caller may handle (NotFound, AlreadyExists, PreconditionFailed) come
    /// as this type with that Status.
    /// </summary>
    public class CoordinationException : TicketingException
    {
        /// <summary>The server's status (Success for an outcome of the client's own).</summary>
        public CoordinationStatus Status { get; internal set; }

        /// <summary>An exception with a default message.</summary>
        public CoordinationException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public CoordinationException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public CoordinationException(string message, Exception innerException) : base(message, innerException) { }

        /// <summary>The exception a status answers with (null for Success).</summary>
        internal static CoordinationException FromStatus(string what, ushort status, string message)
        {
            if (status == 0) return null;
            var st = (CoordinationStatus)status;
            var text = "coordination: " + what + ": " + st + (string.IsNullOrEmpty(message) ? "" : ": " + message);
            if (st == CoordinationStatus.SessionExpired) return new SessionExpiredException(text) { Status = st };
            return new CoordinationException(text) { Status = st };
        }
    }

    /// <summary>The session ended: it expired on the server, its node was dropped, or it could not be restored within its timeout and the node's grace period. Its holds are gone.</summary>
    public sealed class SessionExpiredException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public SessionExpiredException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public SessionExpiredException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public SessionExpiredException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>An acquire was not granted: tried once (timeout zero) or its queue timeout passed.</summary>
    public sealed class SemaphoreNotAcquiredException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public SemaphoreNotAcquiredException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public SemaphoreNotAcquiredException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public SemaphoreNotAcquiredException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>
    /// The session's conservative deadline passed (the server answered no
    /// request of the session for timeout × 0.99 − 100 ms since it was sent):
    /// the server might expire the session soon, so its holds were given up on
    /// the client. The session restores itself; acquire again for a new hold.
    /// </summary>
    public sealed class DeadlinePassedException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public DeadlinePassedException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public DeadlinePassedException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public DeadlinePassedException(string message, Exception innerException) : base(message, innerException) { }
    }

    /// <summary>A hold ended without its owner's release: its semaphore was deleted with force, or a newer hold of the same session replaced it.</summary>
    public sealed class LeaseLostException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public LeaseLostException() { }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public LeaseLostException(string message) : base(message) { }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public LeaseLostException(string message, Exception innerException) : base(message, innerException) { }
    }
}
