package io.ticketing;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * The release of an exact token ({@code L}): sent again across reconnects
 * until the release's bound ({@link TicketBroker#RELEASE_BOUND}) from its
 * start, never presumed successful. Explicit releases, background releases
 * and compensating releases of late grants all end here.
 */
final class Releaser {
    private final Config cfg;
    private final Connector connector;

    Releaser(Config cfg, Connector connector) {
        this.cfg = cfg;
        this.connector = connector;
    }

    /**
     * Releases key's exact token, retrying across reconnects until
     * start + RELEASE_BOUND. R returns, N is NotHeld, B is Capacity; no final
     * answer in time is an error (Indeterminate if a release may have been
     * sent, Unavailable if none could be), never success.
     */
    void release(String key, long token, long startNanos, boolean draining) {
        String op = "release of token " + Long.toUnsignedString(token) + " for " + Arguments.quote(key);
        long deadline = startNanos + TimeUnit.MILLISECONDS.toNanos(cfg.releaseBoundMs);
        int sent = 0;
        Conn.Failure lastFail = null;
        byte[] kb = key.getBytes(StandardCharsets.UTF_8);
        try {
            while (true) {
                if (System.nanoTime() - deadline >= 0) {
                    if (sent > 0) {
                        throw unknownRelease(op, lastFail, false);
                    }
                    throw new UnavailableException(op + ": not sent: no connection to the leader within the release's bound of " + cfg.releaseBoundMs + " ms");
                }
                Conn c;
                try {
                    c = connector.getConn(deadline, draining, op, "within the release's bound of " + cfg.releaseBoundMs + " ms");
                } catch (ClosedException | UnavailableException | UnauthenticatedException e) {
                    if (sent > 0) {
                        throw unknownRelease(op, lastFail, e instanceof ClosedException);
                    }
                    throw e;
                }
                Conn.Call cl = new Conn.Call(Type.RELEASE, key, null);
                Frame f = new Frame(Type.RELEASE);
                f.token = token;
                f.key = kb;
                Conn.Start st = c.start(cl, f, deadline);
                if (st == Conn.Start.GONE) {
                    continue;
                }
                if (st == Conn.Start.TIMEOUT) {
                    if (sent > 0) {
                        throw unknownRelease(op, lastFail, false);
                    }
                    throw new UnavailableException(op + ": not sent: no free request slot on the connection before the deadline");
                }
                sent++;
                Conn.Answer a;
                try {
                    a = cl.res.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    a = c.abandon(cl);
                    if (a == null) {
                        throw unknownRelease(op, lastFail, false);
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    c.abandon(cl);
                    throw new CancellationException(op + ": interrupted after the release was sent; its outcome is unknown");
                }
                if (a.fail() != null) {
                    lastFail = a.fail();
                    if (lastFail.closed()) {
                        throw unknownRelease(op, lastFail, true);
                    }
                    continue; // the exact token again, on the next connection
                }
                switch (a.frame().type) {
                    case Type.RELEASED -> {
                        return;
                    }
                    case Type.NOT_HELD -> {
                        if (sent > 1) {
                            // N may answer our own earlier attempt: a distinct
                            // subclass, so callers can tell (docs/protocol.md).
                            throw new NotHeldAfterRetryException(op + ": the server answered that this token does not hold the key; an earlier attempt whose answer was lost may have released it (or it had expired or been released before)");
                        }
                        throw new NotHeldException(op + ": the server answered that this token does not hold the key (it expired or was released before)");
                    }
                    // final: the same release would be refused again, so it is not retried
                    case Type.FORBIDDEN -> throw PermissionDeniedException.answered(op, c.addr, a.frame().reason, "; not released, the ticket stays held");
                    default -> throw new CapacityException(op + ": not released: rejected by a server capacity limit ("
                            + CapacityException.reasonName(a.frame().reason) + "); the ticket stays held until its lease expires", a.frame().reason);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            if (sent > 0) {
                throw new CancellationException(op + ": interrupted; an earlier attempt may have released it, outcome unknown");
            }
            throw new CancellationException(op + ": interrupted before it was sent; nothing was sent");
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    private IndeterminateException unknownRelease(String op, Conn.Failure lastFail, boolean closed) {
        String why = lastFail != null ? lastFail.what() + " and no final answer came" : "no final answer came";
        return new IndeterminateException(op + ": outcome unknown: " + why + " within " + cfg.releaseBoundMs
                + " ms of the call; the ticket may still be held until its lease expires", null, lastFail != null ? lastFail.code() : 0,
                closed || (lastFail != null && lastFail.closed()));
    }
}
