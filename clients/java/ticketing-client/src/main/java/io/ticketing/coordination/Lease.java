package io.ticketing.coordination;

import java.util.concurrent.CompletableFuture;

/**
 * A hold on a semaphore. {@link #isValid()} compares the session's
 * conservative deadline on the spot, so a process paused past it sees the
 * hold ended at its first check; {@link #ended()} completes with the cause
 * when the hold ends ({@link DeadlinePassedException}, {@link LostException},
 * {@link ReleasedException}, {@link SessionExpiredException},
 * {@link io.ticketing.ClosedException}).
 */
public final class Lease {
    private final Session session;
    private final String name;
    private final long token;
    volatile long count;
    private final CompletableFuture<RuntimeException> ended = new CompletableFuture<>();

    Lease(Session session, String name, long token, long count) {
        this.session = session;
        this.name = name;
        this.token = token;
        this.count = count;
    }

    /**
     * The semaphore's name.
     *
     * @return the name
     */
    public String name() {
        return name;
    }

    /**
     * The hold's order id: a fencing token, strictly increasing across the service (the counter of ticket tokens).
     *
     * @return the token
     */
    public long token() {
        return token;
    }

    /**
     * The count held (exclusive: the semaphore's limit).
     *
     * @return the count
     */
    public long count() {
        return count;
    }

    /**
     * Whether the hold still stands, checked against the session's deadline now.
     *
     * @return true while the hold stands
     */
    public boolean isValid() {
        if (ended.isDone()) {
            return false;
        }
        session.checkDeadline();
        return !ended.isDone();
    }

    /**
     * Completes with the cause when the hold ends. Its dependent actions
     * run on a thread of the client, never on the connection's reader.
     *
     * @return a future of the end's cause
     */
    public CompletableFuture<RuntimeException> ended() {
        return ended.thenApplyAsync(e -> e, session.executor());
    }

    /**
     * The cause of the end.
     *
     * @return the cause, or null while the hold stands
     */
    public RuntimeException endCause() {
        return ended.getNow(null);
    }

    /** Ends the hold on the server and here. */
    public void releaseBlocking() {
        try {
            session.release(name);
        } finally {
            session.forget(this);
            end(new ReleasedException("coordination: " + name + ": released"));
        }
    }

    /**
     * {@link #releaseBlocking()} on a thread of the client.
     *
     * @return a future completed when the hold has ended
     */
    public CompletableFuture<Void> releaseAsync() {
        return CompletableFuture.runAsync(this::releaseBlocking, session.executor());
    }

    void end(RuntimeException cause) {
        ended.complete(cause);
    }
}
