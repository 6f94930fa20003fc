using System;
using System.Threading;

namespace Ticketing
{
    /// <summary>
    /// The bounds every call keeps: the broker's operation timeout linked with
    /// the caller's token, and the grace for an answer on a live connection.
    /// </summary>
    internal static class CallBounds
    {
        /// <summary>
        /// A call not sent within the operation timeout: WrongClusterException
        /// when the servers that answered belong to another cluster than the
        /// pinned one, UnavailableException otherwise.
        /// </summary>
        internal static UnavailableException NotSentInTime(string msg, Exception cause)
        {
            if (cause is WrongClusterException) return new WrongClusterException(msg, cause);
            return new UnavailableException(msg, cause);
        }

        /// <summary>
        /// When the caller passed no cancellable token, a source that ends the
        /// call after the broker's operation timeout plus extra (an acquire's
        /// wait); with a token, the same source linked with it, so that the
        /// token ends the call sooner, never later (as HttpClient.Timeout with
        /// a request's token); null when the timeout is infinite, and the
        /// caller's token alone governs.
        /// </summary>
        internal static CancellationTokenSource DefaultLimit(Config Cfg, CancellationToken ct, TimeSpan extra)
        {
            if (Cfg.OperationTimeout == Timeout.InfiniteTimeSpan) return null;
            var cts = CancellationTokenSource.CreateLinkedTokenSource(ct);
            cts.CancelAfter(Cfg.OperationTimeout + extra);
            return cts;
        }

        /// <summary>The caller's own cancellation, reported with the caller's token (not the linked one the call ran under).</summary>
        internal static OperationCanceledException CallersCancellation(OperationCanceledException e, CancellationToken ct)
        {
            return new OperationCanceledException(e.Message, e.InnerException ?? e, ct);
        }

        /// <summary>How long past its wait a request waits for its final answer on a live connection before giving up on it.</summary>
        internal static TimeSpan AnswerGrace(Config Cfg, Connection c)
        {
            if (Cfg.AnswerGraceOverride > TimeSpan.Zero) return Cfg.AnswerGraceOverride;
            return c.Silence > Cfg.MinAnswerGrace ? c.Silence : Cfg.MinAnswerGrace;
        }
    }
}
