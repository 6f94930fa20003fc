package io.ticketing;

import org.jspecify.annotations.Nullable;
import java.time.Duration;
import java.time.Instant;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A granted ticket. Its token fences every write made under it: in the same
 * database transaction as the protected write, reject the write if the token
 * is not above the stored high-water mark, store the token, write, commit,
 * and only then release. Release it with {@link #releaseBlocking()} or
 * {@link #releaseAsync()} (Kotlin: the suspend function {@code release()})
 * to learn the outcome, or with {@link #close()}: best effort, in the
 * background, for try-with-resources and Kotlin's {@code use}.
 */
public final class Ticket implements AutoCloseable {
    private final TicketBroker broker;
    private final String key;
    private final long token;
    private final long deadlineNanos;
    private final long leaseMs;
    private final long queuedMs;
    final String nodeId; // the node that granted it (tests, diagnostics)

    private final ReentrantLock mu = new ReentrantLock();
    private boolean started; // release() or close() was called
    private final CompletableFuture<TicketingException> outcome = new CompletableFuture<>();

    Ticket(TicketBroker broker, String key, long token, long deadlineNanos, long leaseMs, long queuedMs, String nodeId) {
        this.broker = broker;
        this.nodeId = nodeId;
        this.key = key;
        this.token = token;
        this.deadlineNanos = deadlineNanos;
        this.leaseMs = leaseMs;
        this.queuedMs = queuedMs;
    }

    /**
     * The ticket's key.
     *
     * @return the key
     */
    public String getKey() {
        return key;
    }

    /**
     * The fencing token: strictly larger than every token granted before it,
     * for any key. An unsigned 64-bit value; servers start at 1 and count up,
     * so it is positive in practice (use {@link Long#toUnsignedString} to print it in general).
     * @return the token, unsigned
     */
    public long getToken() {
        return token;
    }

    /**
     * The lease the server granted.
     *
     * @return the lease
     */
    public Duration getLease() {
        return Duration.ofMillis(leaseMs);
    }

    /**
     * How long the acquire waited in the key's queue, as the server reported it.
     *
     * @return the time spent queued
     */
    public Duration getQueued() {
        return Duration.ofMillis(queuedMs);
    }

    /**
     * The time left until the conservative end of the lease, measured on this
     * machine's monotonic clock (negative once it passed). Never later than the
     * server's end of the lease: {@code sent + (lease + queued) × 99 % − 100 ms}.
     * Finish the protected work before it runs out.
     * @return the time left, negative once it passed
     */
    public Duration getRemaining() {
        return Duration.ofNanos(deadlineNanos - System.nanoTime());
    }

    /**
     * {@link #getRemaining()} as a wall-clock instant (derived from the monotonic clock now).
     *
     * @return the instant the conservative lease ends
     */
    public Instant getDeadline() {
        return Instant.now().plus(getRemaining());
    }

    /**
     * The deadline on the {@link System#nanoTime()} scale.
     *
     * @return the deadline in nanoseconds of {@link System#nanoTime()}
     */
    public long deadlineNanos() {
        return deadlineNanos;
    }

    void finish(TicketingException err) {
        outcome.complete(err);
    }

    /**
     * Releases the ticket and reports the outcome: returns when the server
     * answered R; {@link NotHeldException} for N (it had already expired or
     * been released; {@link NotHeldAfterRetryException} when N answered a
     * release sent again after a lost answer, which the earlier attempt may
     * have released); {@link PermissionDeniedException} for F (final, not
     * retried: the ticket stays held); another exception when no final answer came within
     * {@link TicketBroker#RELEASE_BOUND} (5 s from this call, retried with the
     * exact token across reconnects). A failed release is never presumed
     * successful. A second call (or a call after {@link #close()}) waits for
     * the first release's outcome and reports it.
     */
    public void releaseBlocking() {
        if (!begin()) {
            TicketingException e;
            try {
                e = outcome.get();
            } catch (InterruptedException ie) {
                Thread.currentThread().interrupt();
                throw new CancellationException("release of token " + token + ": interrupted while waiting for an earlier release's outcome");
            } catch (ExecutionException ee) {
                throw new IllegalStateException(ee);
            }
            if (e != null) {
                throw e;
            }
            return;
        }
        try {
            broker.release(key, token, System.nanoTime(), false);
        } catch (TicketingException e) {
            finish(e);
            throw e;
        } catch (RuntimeException e) {
            finish(new IndeterminateException("release of token " + token + ": " + e.getMessage(), e, 0, false));
            throw e;
        }
        finish(null);
    }

    /**
     * {@link #releaseBlocking()} as a future.
     *
     * @return completes when released, or with the exception {@link #releaseBlocking()} would throw
     */
    public CompletableFuture<@Nullable Void> releaseAsync() {
        CompletableFuture<Void> f = new CompletableFuture<>();
        Threads.start("ticketing-release", () -> {
            try {
                releaseBlocking();
                f.complete(null);
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        });
        return f;
    }

    /**
     * Releases the ticket in the background, best effort, and returns at once:
     * meant for try-with-resources and {@code use}. The release runs on the
     * broker's executor (virtual threads by default) and is retried with the
     * exact token for {@link TicketBroker#RELEASE_BOUND} from now; its outcome
     * goes to the release observer and the log. Callers who need the outcome use
     * {@link #releaseBlocking()}. Close after release (or a second close) does nothing.
     */
    @Override
    public void close() {
        if (begin()) {
            broker.enqueueRelease(key, token, this);
        }
    }

    /** Marks the ticket as being released; false when that already happened. */
    private boolean begin() {
        mu.lock();
        try {
            if (started) {
                return false;
            }
            started = true;
            return true;
        } finally {
            mu.unlock();
        }
    }

    /** Waits (tests) until the release started by close() has an outcome; null means released. */
    TicketingException awaitOutcome(long timeoutMs) throws Exception {
        return outcome.get(timeoutMs, TimeUnit.MILLISECONDS);
    }

    @Override
    public String toString() {
        return "Ticket{key=" + Arguments.quote(key) + ", token=" + Long.toUnsignedString(token) + ", lease=" + leaseMs + "ms}";
    }
}
