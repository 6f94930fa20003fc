package io.ticketing;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Describe ({@code D}, answered {@code I}): reads the state of one key from
 * the leader. Read-only, so a connection lost before the answer is
 * {@link UnavailableException} and nothing is retried.
 */
final class Describer {
    private final Config cfg;
    private final Connector connector;

    Describer(Config cfg, Connector connector) {
        this.cfg = cfg;
        this.connector = connector;
    }

    /** The state of key; see {@link TicketBroker#describeBlocking}. */
    Description describe(String key) {
        int klen = key.getBytes(StandardCharsets.UTF_8).length;
        String op = "describe " + Arguments.quote(key);
        if (klen < 1 || klen > TicketBroker.MAX_KEY) {
            throw new InvalidArgumentException(op + ": the key is " + klen + " bytes, it must be 1.." + TicketBroker.MAX_KEY + " bytes; nothing was sent");
        }
        long deadline = connector.connectDeadline();
        try {
            while (true) {
                Conn c = connector.getConn(deadline, false, op, "within the connect wait of " + cfg.connectWaitMs + " ms");
                Conn.Call cl = new Conn.Call(Type.DESCRIBE, key, null);
                Frame f = new Frame(Type.DESCRIBE);
                f.key = key.getBytes(StandardCharsets.UTF_8);
                Conn.Start st = c.start(cl, f, deadline);
                if (st == Conn.Start.GONE) {
                    continue;
                }
                if (st == Conn.Start.TIMEOUT) {
                    throw new UnavailableException(op + ": not sent: no free request slot on the connection within the connect wait");
                }
                Conn.Answer a;
                try {
                    a = cl.res.get(connector.answerGraceMs(c), TimeUnit.MILLISECONDS);
                } catch (TimeoutException e) {
                    a = c.abandon(cl);
                    if (a == null) {
                        throw new UnavailableException(op + ": the server " + c.addr + " sent no answer within " + connector.answerGraceMs(c) + " ms");
                    }
                }
                if (a.fail() != null) {
                    throw new UnavailableException(op + ": " + a.fail().what() + " before the answer", null, a.fail().code());
                }
                Frame i = a.frame();
                if (i.type == Type.FORBIDDEN) {
                    throw PermissionDeniedException.answered(op, c.addr, i.reason, "");
                }
                if (i.type == Type.CAPACITY) {
                    throw new CapacityException(op + ": rejected by a server capacity limit (" + CapacityException.reasonName(i.reason)
                            + "); back off before asking again", i.reason);
                }
                return new Description(key, (i.flags & Type.INFO_HELD) != 0, i.token, Owner.of(i.owner), Duration.ofMillis(i.remainingMs),
                        Duration.ofMillis(i.leaseMs), i.count);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CancellationException(op + ": interrupted");
        } catch (ExecutionException e) {
            throw new IllegalStateException(e);
        }
    }
}
