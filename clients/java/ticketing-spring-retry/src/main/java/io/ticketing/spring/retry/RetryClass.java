package io.ticketing.spring.retry;

/**
 * The retry class of a failure, named after the YDB status codes the policy
 * was ported from, exactly as the Go {@code retry} package has them (same
 * names, same order, same "retried" rule and backoff tier as retry/doc.go's
 * table; {@code RetryClassParityTest} reads that table).
 */
public enum RetryClass {
    /** Unknown or permanent: not retried. */
    NON_RETRYABLE(Retried.NEVER, Tier.NONE),
    /** Transaction conflict, deadlock, lock timeout, SQLite busy. */
    ABORTED(Retried.ALWAYS, Tier.FAST),
    /** Server shutting down or starting up, or a connection refused at dial time (nothing was sent). */
    UNAVAILABLE(Retried.ALWAYS, Tier.FAST),
    /** The server rejected the call for capacity. */
    OVERLOADED(Retried.ALWAYS, Tier.SLOW),
    /** Too many connections. */
    CLIENT_RESOURCE_EXHAUSTED(Retried.ALWAYS, Tier.SLOW),
    /** The session must be recreated (coordination BAD_SESSION). */
    BAD_SESSION(Retried.ALWAYS, Tier.ZERO),
    /** Commit outcome unknown. */
    UNDETERMINED(Retried.IF_IDEMPOTENT, Tier.FAST),
    /** The connection could not be used. */
    TRANSPORT_UNAVAILABLE(Retried.IF_IDEMPOTENT, Tier.FAST),
    /** The connection broke mid-call (YDB's CLIENT_GRPC_ERROR). */
    CLIENT_TRANSPORT_ERROR(Retried.IF_IDEMPOTENT, Tier.FAST),
    /** The session expired mid-call (coordination SESSION_EXPIRED). */
    SESSION_EXPIRED(Retried.IF_IDEMPOTENT, Tier.ZERO),
    /** Deadline exceeded: never retried. */
    TIMEOUT(Retried.NEVER, Tier.NONE),
    /** Cancelled or interrupted: never retried. */
    CANCELED(Retried.NEVER, Tier.NONE),
    /** A stale fencing token or one already committed (ticketing-jdbc's StaleTokenException, TokenCommittedException): never retried. */
    PRECONDITION_FAILED(Retried.NEVER, Tier.NONE),
    /** Not found (coordination NOT_FOUND; no Java failure has it yet): never retried. */
    NOT_FOUND(Retried.NEVER, Tier.NONE),
    /** An invalid argument (the client's InvalidArgumentException): never retried. */
    INVALID_ARGUMENT(Retried.NEVER, Tier.NONE);

    enum Retried { NEVER, ALWAYS, IF_IDEMPOTENT }

    /** Which backoff a retried class waits: FAST and SLOW as in the Go package, ZERO retries at once, NONE is never retried. */
    public enum Tier {
        /** Not retried. */
        NONE,
        /** Full jitter in [0, ceiling). */
        FAST,
        /** Equal jitter in [ceiling/2, ceiling). */
        SLOW,
        /** Retried at once. */
        ZERO
    }

    private final Retried retried;
    private final Tier tier;

    RetryClass(Retried retried, Tier tier) {
        this.retried = retried;
        this.tier = tier;
    }

    /**
     * Whether a failure of this class is retried; idempotent calls are also retried when the outcome is unknown.
     *
     * @param idempotent whether the method is marked idempotent
     * @return whether to retry
     */
    public boolean retryable(boolean idempotent) {
        return retried == Retried.ALWAYS || (retried == Retried.IF_IDEMPOTENT && idempotent);
    }

    /**
     * The backoff tier.
     *
     * @return the tier
     */
    public Tier tier() {
        return tier;
    }
}
