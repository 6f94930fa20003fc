package io.ticketing.spring.retry;

/**
 * The retry class of a failure, named after the YDB status codes the policy
 * was ported from, exactly as the Go {@code retry} package has them.
 */
public enum RetryClass {
    /** Unknown or permanent: not retried. */
    NON_RETRYABLE(Retried.NEVER, Tier.NONE),
    /** Transaction conflict, deadlock, SQLite busy. */
    ABORTED(Retried.ALWAYS, Tier.FAST),
    /** Server shutting down or starting up. */
    UNAVAILABLE(Retried.ALWAYS, Tier.FAST),
    /** The server rejected the call for capacity. */
    OVERLOADED(Retried.ALWAYS, Tier.SLOW),
    /** Too many connections. */
    CLIENT_RESOURCE_EXHAUSTED(Retried.ALWAYS, Tier.SLOW),
    /** The session must be recreated. */
    BAD_SESSION(Retried.ALWAYS, Tier.ZERO),
    /** The session is in use. */
    SESSION_BUSY(Retried.ALWAYS, Tier.ZERO),
    /** Commit outcome unknown. */
    UNDETERMINED(Retried.IF_IDEMPOTENT, Tier.FAST),
    /** The connection could not be used (refused, broken before the call). */
    TRANSPORT_UNAVAILABLE(Retried.IF_IDEMPOTENT, Tier.FAST),
    /** The connection broke mid-call (YDB's CLIENT_GRPC_ERROR). */
    CLIENT_TRANSPORT_ERROR(Retried.IF_IDEMPOTENT, Tier.FAST),
    /** The session expired mid-call. */
    SESSION_EXPIRED(Retried.IF_IDEMPOTENT, Tier.ZERO),
    /** Deadline exceeded: never retried. */
    TIMEOUT(Retried.NEVER, Tier.NONE),
    /** Cancelled or interrupted: never retried. */
    CANCELED(Retried.NEVER, Tier.NONE);

    enum Retried { NEVER, ALWAYS, IF_IDEMPOTENT }

    /** Which backoff a retried class waits. */
    public enum Tier { NONE, FAST, SLOW, ZERO }

    private final Retried retried;
    private final Tier tier;

    RetryClass(Retried retried, Tier tier) {
        this.retried = retried;
        this.tier = tier;
    }

    /** Whether a failure of this class is retried; idempotent calls are also retried when the outcome is unknown. */
    public boolean retryable(boolean idempotent) {
        return retried == Retried.ALWAYS || (retried == Retried.IF_IDEMPOTENT && idempotent);
    }

    public Tier tier() {
        return tier;
    }
}
