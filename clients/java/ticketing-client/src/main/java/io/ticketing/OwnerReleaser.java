package io.ticketing;

import io.ticketing.wire.ErrorCode;
import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.lang.System.Logger.Level;
import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Release by owner ({@code U}): when an acquire's connection ended before its
 * final answer, the grant it may have won is ended on the next connection by
 * the acquire's owner id, retried across reconnects until the grant could no
 * longer matter. A server that does not know {@code U} is noted once; such
 * grants then expire with their lease.
 */
final class OwnerReleaser {
    private final Connector connector;
    private final Set<Thread> running = ConcurrentHashMap.newKeySet();
    /**
     * Set when a server ended the session with E 3 (unknown frame) while a
     * release by owner was in flight: it predates U, and sending U again
     * would only end more sessions. Orphaned grants then expire with their lease.
     */
    private volatile boolean unsupported;

    OwnerReleaser(Connector connector) {
        this.connector = connector;
    }

    /**
     * An acquire's connection ended before its final answer: on the next
     * connection, ask the leader to end whatever that owner holds or waits for
     * on the key ({@code U}), retrying until the grant could no longer matter.
     */
    void orphaned(String key, byte[] owner, long untilNanos) {
        if (connector.isTorn() || unsupported) {
            return;
        }
        Thread t = Threads.unstarted("ticketing-release-owner", () -> {
            try {
                String outcome = releaseOwner(key, owner, untilNanos);
                Reporter.LOG.log(Level.DEBUG, "ticketing: release by owner of {0} after a lost acquire answer: {1}", Arguments.quote(key), outcome);
            } catch (RuntimeException e) {
                if (!connector.isTorn()) {
                    Reporter.LOG.log(Level.WARNING, "ticketing: release by owner of {0} after a lost acquire answer failed; the key stays held until "
                            + "the lease expires: {1}", Arguments.quote(key), e.getMessage());
                }
            } finally {
                running.remove(Thread.currentThread());
            }
        });
        running.add(t);
        t.start();
    }

    /**
     * Ends whatever owner holds or waits for on key (U), across reconnects,
     * until untilNanos. Returns "released" (R) or "not held" (N).
     */
    String releaseOwner(String key, byte[] owner, long untilNanos) {
        String op = "release by owner " + HexFormat.of().formatHex(owner) + " of " + Arguments.quote(key);
        byte[] kb = key.getBytes(StandardCharsets.UTF_8);
        try {
            while (true) {
                Conn c;
                try {
                    c = connector.getConn(untilNanos, true, op, "before the release by owner's deadline (the acquire's wait plus twice its lease)");
                } catch (UnauthenticatedException | UnavailableException e) {
                    if (System.nanoTime() - untilNanos >= 0) {
                        throw e;
                    }
                    connector.awaitChange(untilNanos); // every server refuses for now
                    continue;
                }
                Conn.Call cl = new Conn.Call(Type.RELEASE_OWNER, key, owner);
                Frame f = new Frame(Type.RELEASE_OWNER);
                f.owner = owner;
                f.key = kb;
                Conn.Start st = c.start(cl, f, untilNanos);
                if (st == Conn.Start.GONE) {
                    continue;
                }
                if (st == Conn.Start.TIMEOUT) {
                    throw new UnavailableException(op + ": not sent: no free request slot before the grant could expire");
                }
                Conn.Answer a;
                try {
                    a = cl.res.get(Math.max(0, untilNanos - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (TimeoutException e) {
                    a = c.abandon(cl);
                    if (a == null) {
                        throw new IndeterminateException(op + ": no answer before the grant could expire", null, 0, false);
                    }
                }
                if (a.fail() != null) {
                    if (a.fail().closed()) {
                        throw new ClosedException(op + ": the broker was closed");
                    }
                    if (a.fail().kind() == Conn.Kind.SERVER_ERROR && a.fail().code() == ErrorCode.UNKNOWN_FRAME) {
                        if (!unsupported) {
                            unsupported = true;
                            Reporter.LOG.log(Level.WARNING, "ticketing: the server {0} does not know the release-by-owner frame (U): upgrade the "
                                    + "servers; until then a grant whose answer was lost stays held until its lease expires", c.addr);
                        }
                        return "not supported by the server";
                    }
                    continue; // U is idempotent: again on the next connection
                }
                switch (a.frame().type) {
                    case Type.RELEASED -> {
                        return "released";
                    }
                    case Type.NOT_HELD -> {
                        return "not held";
                    }
                    case Type.FORBIDDEN -> throw PermissionDeniedException.answered(op, c.addr, a.frame().reason, "; not released");
                    default -> throw new CapacityException(op + ": rejected by a server capacity limit ("
                            + CapacityException.reasonName(a.frame().reason) + ")", a.frame().reason);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ClosedException(op + ": stopped (the broker is closing)");
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Whether a server was found not to know U. */
    boolean unsupported() {
        return unsupported;
    }

    /** Close: releases by owner wait for reconnects, possibly long, so they are stopped, not waited for. */
    void interruptAll() {
        for (Thread t : running) {
            t.interrupt();
        }
    }
}
