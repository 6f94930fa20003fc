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
    /// A coordination request refused by the server with a status, or a
    /// coordination outcome of the client's. Every status has its subclass
    /// (NotFoundException, AlreadyExistsException, ...; Status carries the
    /// number too, so a filter on Status works alike); a status of a newer
    /// server comes as this type with its number.
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
            switch (st)
            {
                case CoordinationStatus.NotFound: return new NotFoundException(text);
                case CoordinationStatus.AlreadyExists: return new AlreadyExistsException(text);
                case CoordinationStatus.BadRequest: return new BadRequestException(text);
                case CoordinationStatus.PreconditionFailed: return new PreconditionFailedException(text);
                case CoordinationStatus.Aborted: return new AbortedException(text);
                case CoordinationStatus.SessionExpired: return new SessionExpiredException(text) { Status = st };
                case CoordinationStatus.BadSession: return new BadSessionException(text);
                case CoordinationStatus.Unauthorized: return new UnauthorizedException(text);
                case CoordinationStatus.LimitExceeded: return new LimitExceededException(text);
            }
            // A status of a newer server: its number is kept.
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

    /// <summary>The node, semaphore or session does not exist (the status NotFound).</summary>
    public sealed class NotFoundException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public NotFoundException() { Status = CoordinationStatus.NotFound; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public NotFoundException(string message) : base(message) { Status = CoordinationStatus.NotFound; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public NotFoundException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.NotFound; }
    }

    /// <summary>The node or semaphore exists already (the status AlreadyExists).</summary>
    public sealed class AlreadyExistsException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public AlreadyExistsException() { Status = CoordinationStatus.AlreadyExists; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public AlreadyExistsException(string message) : base(message) { Status = CoordinationStatus.AlreadyExists; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public AlreadyExistsException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.AlreadyExists; }
    }

    /// <summary>The server found a field out of range or malformed (the status BadRequest): the same request always fails. Arguments the client can check itself are refused before sending with an ArgumentException instead.</summary>
    public sealed class BadRequestException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public BadRequestException() { Status = CoordinationStatus.BadRequest; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public BadRequestException(string message) : base(message) { Status = CoordinationStatus.BadRequest; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public BadRequestException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.BadRequest; }
    }

    /// <summary>The request does not fit the current state, such as a semaphore in use or a limit below the count held (the status PreconditionFailed).</summary>
    public sealed class PreconditionFailedException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public PreconditionFailedException() { Status = CoordinationStatus.PreconditionFailed; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public PreconditionFailedException(string message) : base(message) { Status = CoordinationStatus.PreconditionFailed; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public PreconditionFailedException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.PreconditionFailed; }
    }

    /// <summary>A wait was ended: its semaphore was deleted with force, or a newer request replaced it (the status Aborted).</summary>
    public sealed class AbortedException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public AbortedException() { Status = CoordinationStatus.Aborted; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public AbortedException(string message) : base(message) { Status = CoordinationStatus.Aborted; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public AbortedException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.Aborted; }
    }

    /// <summary>The session is not this connection's, or an attach lost to a higher sequence number (the status BadSession).</summary>
    public sealed class BadSessionException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public BadSessionException() { Status = CoordinationStatus.BadSession; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public BadSessionException(string message) : base(message) { Status = CoordinationStatus.BadSession; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public BadSessionException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.BadSession; }
    }

    /// <summary>The principal may not make this request (the status Unauthorized).</summary>
    public sealed class UnauthorizedException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public UnauthorizedException() { Status = CoordinationStatus.Unauthorized; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public UnauthorizedException(string message) : base(message) { Status = CoordinationStatus.Unauthorized; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public UnauthorizedException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.Unauthorized; }
    }

    /// <summary>A limit of the node (sessions, semaphores, waiters) or a principal's quota was reached (the status LimitExceeded).</summary>
    public sealed class LimitExceededException : CoordinationException
    {
        /// <summary>An exception with a default message.</summary>
        public LimitExceededException() { Status = CoordinationStatus.LimitExceeded; }
        /// <summary>An exception with a message.</summary>
        /// <param name="message">What happened and what to do.</param>
        public LimitExceededException(string message) : base(message) { Status = CoordinationStatus.LimitExceeded; }
        /// <summary>An exception with a message and its cause.</summary>
        /// <param name="message">What happened and what to do.</param>
        /// <param name="innerException">The cause.</param>
        public LimitExceededException(string message, Exception innerException) : base(message, innerException) { Status = CoordinationStatus.LimitExceeded; }
    }
}
