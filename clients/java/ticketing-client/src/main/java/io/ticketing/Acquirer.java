package io.ticketing;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Acquire ({@code A}): sends the request under a fresh owner id, waits for
 * the final answer, and turns it into a {@link Ticket} or the exception the
 * caller must see. Once the request may have been sent, a lost answer is
 * {@link IndeterminateException}, never re-sent, except after a stopping
 * server's {@code E} 11: then it is sent again with the same owner and what
 * remains of its wait on the next connection; a grant that arrives for a
 * caller who left, or too late for the work budget, is released in the
 * background with its exact token. Every outcome and its latency go to the
 * listener.
 */
final class Acquirer {
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Config cfg;
    private final TicketBroker broker;
    private final Connector connector;
    private final ReleaseQueue releases;
    private final OwnerReleaser ownerReleases;
    private final Reporter reporter;

    Acquirer(Config cfg, TicketBroker broker, Connector connector, ReleaseQueue releases, OwnerReleaser ownerReleases, Reporter reporter) {
        this.cfg = cfg;
        this.broker = broker;
        this.connector = connector;
        this.releases = releases;
        this.ownerReleases = ownerReleases;
        this.reporter = reporter;
    }

    /**
     * The latest moment, on this machine's monotonic clock, at which the
     * client may still believe it holds the ticket:
     * {@code sent + (lease + queued) × (1 − 1 %) − 100 ms}. sent is taken just
     * before the request's bytes are handed to the writer, so it precedes the
     * server's receipt; the server's lease ends no earlier than
     * receipt + queued + lease. The percentage allows for clock-rate
     * differences, the fixed margin for millisecond truncation.
     */
    static long conservativeDeadline(long sentNanos, long leaseMs, long queuedMs) {
        long span = TimeUnit.MILLISECONDS.toNanos(leaseMs + queuedMs);
        span -= span * TicketBroker.CLOCK_DRIFT_PERCENT / 100;
        span -= TicketBroker.CLOCK_DRIFT_MARGIN.toNanos();
        return sentNanos + span;
    }

    /** A G arrived for an acquire whose caller left: release that exact token in the background. */
    void lateGrant(String key, long token) {
        releases.enqueue(key, token, null);
    }

    /** Acquires key with checked arguments; the outcome and its latency go to the listener. */
    Ticket acquire(String key, Arguments.AcquireArgs args) {
        long start = System.nanoTime();
        Throwable failure = null;
        try {
            return acquireOnce(key, args);
        } catch (RuntimeException | Error e) {
            failure = e;
            throw e;
        } finally {
            long took = System.nanoTime() - start;
            String outcome = BrokerListener.outcomeOf(failure);
            reporter.tell(l -> l.acquireFinished(outcome, took));
        }
    }

    private Ticket acquireOnce(String key, Arguments.AcquireArgs args) {
        String op = "acquire " + Arguments.quote(key);
        if (Thread.currentThread().isInterrupted()) {
            throw new CancellationException(op + ": cancelled before it was sent; nothing was sent");
        }
        byte[] owner = new byte[16];
        RANDOM.nextBytes(owner);
        long deadline = connector.connectDeadline();
        // interrupted: the first send's call once a stopping server ended its
        // session (E 11); the acquire is then sent again, with the same
        // owner, on the next connection, and if it cannot be, its owner is
        // released like that of any acquire whose answer was lost.
        Conn.Call interrupted = null;
        long firstSent = 0;
        while (true) {
            Conn c;
            Conn.Call cl = new Conn.Call(Type.ACQUIRE, key, owner);
            cl.spanNanos = TimeUnit.SECONDS.toNanos(args.waitSec() + 2L * args.leaseSec());
            int waitSec = args.waitSec();
            if (interrupted != null) {
                // Sent again: the wait is what remains of the first one.
                long left = TimeUnit.SECONDS.toNanos(args.waitSec()) - (System.nanoTime() - firstSent);
                waitSec = (int) Math.max(0, (left + 999_999_999L) / 1_000_000_000L);
                deadline = connector.connectDeadline();
            }
            Frame f = new Frame(Type.ACQUIRE);
            f.owner = owner;
            f.waitSec = waitSec;
            f.leaseSec = args.leaseSec();
            f.key = key.getBytes(StandardCharsets.UTF_8);
            try {
                c = connector.getConn(deadline, false, op, "within the connect wait of " + cfg.connectWaitMs + " ms");
                Conn.Start st = c.start(cl, f, deadline);
                if (st == Conn.Start.GONE) {
                    continue; // nothing was sent: try the next connection
                }
                if (st == Conn.Start.TIMEOUT) {
                    throw new UnavailableException(op + ": not sent: the connection's in-flight limit (" + c.maxInFlight
                            + ") was reached and no slot freed within the connect wait");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                if (interrupted != null) {
                    throw notSentAgain(op, interrupted, "cancelled", e, false);
                }
                throw new CancellationException(op + ": cancelled before it was sent; nothing was sent");
            } catch (TicketingException e) {
                if (interrupted != null) {
                    throw notSentAgain(op, interrupted, e.getMessage(), e, e instanceof ClosedException);
                }
                throw e;
            }
            if (interrupted == null) {
                firstSent = cl.sentNanos;
            }
            Ticket t = awaitAcquire(c, cl, args, waitSec, op);
            if (t != null) {
                return t;
            }
            interrupted = cl;
        }
    }

    /**
     * An acquire a stopping server interrupted that could not be sent again:
     * indeterminate, and its owner is released like that of any acquire
     * whose answer was lost.
     */
    private IndeterminateException notSentAgain(String op, Conn.Call first, String why, Throwable cause, boolean closed) {
        ownerReleases.orphaned(first.key, first.owner, first.sentNanos + first.spanNanos);
        return new IndeterminateException(op + ": outcome unknown: the server that had it stopped, and it could not be sent again (" + why
                + "); once reconnected, the client releases by owner whatever it may have obtained; do not enter the critical section",
                cause, io.ticketing.wire.ErrorCode.SHUTTING_DOWN, closed);
    }

    /** The outcome of the acquire cl, sent with waitSec; null: a stopping server ended the session first, send it again. */
    private Ticket awaitAcquire(Conn c, Conn.Call cl, Arguments.AcquireArgs args, int waitSec, String op) {
        Conn.Answer a;
        try {
            a = cl.res.get(waitSec * 1000L + connector.answerGraceMs(c), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            Conn.Answer got = c.abandon(cl);
            if (got != null && got.fail() == null && got.frame().type != Type.GRANTED) {
                return finishAcquire(c, cl, got, args, op); // W, X or B arrived first
            }
            if (got != null && got.frame() != null && got.frame().type == Type.GRANTED) {
                lateGrant(cl.key, got.frame().token);
            }
            if (got != null && got.fail() != null && got.fail().shuttingDown()) {
                // The connection left it to this caller, who leaves too.
                ownerReleases.orphaned(cl.key, cl.owner, cl.sentNanos + cl.spanNanos);
            }
            throw new CancellationException(op + ": cancelled after the request was sent; a cancel was sent for it and a grant that "
                    + "arrives anyway is released in the background; do not enter the critical section");
        } catch (TimeoutException e) {
            Conn.Answer got = c.abandon(cl);
            if (got != null) {
                return finishAcquire(c, cl, got, args, op);
            }
            throw new IndeterminateException(op + ": outcome unknown, the server " + c.addr + " sent no final answer within the wait plus "
                    + connector.answerGraceMs(c) + " ms although the connection is alive; a cancel was sent and a late grant is released in the "
                    + "background; do not enter the critical section", null, 0, false);
        } catch (ExecutionException e) {
            throw new IllegalStateException(e); // the future is never completed exceptionally
        }
        return finishAcquire(c, cl, a, args, op);
    }

    /** The outcome of the acquire cl; null: a stopping server ended the session first, send it again. */
    private Ticket finishAcquire(Conn c, Conn.Call cl, Conn.Answer a, Arguments.AcquireArgs args, String op) {
        if (a.fail() != null && a.fail().shuttingDown()) {
            return null;
        }
        if (a.fail() != null) {
            Conn.Failure fl = a.fail();
            throw new IndeterminateException(op + ": outcome unknown, " + fl.what()
                    + " after the request was sent; do not enter the critical section", null, fl.code(), fl.closed());
        }
        Frame f = a.frame();
        switch (f.type) {
            case Type.GRANTED -> {
                long deadline = conservativeDeadline(cl.sentNanos, f.leaseMs, f.queuedMs);
                long rem = deadline - System.nanoTime();
                if (rem <= 0 || rem < args.budgetNanos()) {
                    lateGrant(cl.key, f.token);
                    throw new BudgetExceededException(op + ": granted token " + Long.toUnsignedString(f.token) + " with a " + f.leaseMs
                            + " ms lease after " + f.queuedMs + " ms in the queue, but only " + Math.max(rem, 0) / 1_000_000
                            + " ms of it conservatively remain, less than the work budget " + Duration.ofNanos(args.budgetNanos())
                            + "; the ticket is being released; do not enter the critical section");
                }
                return new Ticket(broker, cl.key, f.token, deadline, f.leaseMs, f.queuedMs, c.nodeId);
            }
            case Type.NOT_ACQUIRED -> {
                if (args.waitSec() == 0) {
                    throw new NotAcquiredException(op + ": not acquired: the key is held or has waiters (one immediate attempt, wait 0)");
                }
                throw new NotAcquiredException(op + ": not acquired within the wait of " + args.waitSec() + " s");
            }
            case Type.CANCELLED -> throw new NotAcquiredException(op + ": not acquired: the server cancelled the request");
            case Type.FORBIDDEN -> throw PermissionDeniedException.answered(op, c.addr, f.reason, "; not acquired");
            default -> throw new CapacityException(op + ": not acquired: the server " + c.addr + " rejected it for capacity: "
                    + CapacityException.reasonName(f.reason) + "; the client does not retry it, back off before a new acquire", f.reason);
        }
    }
}
