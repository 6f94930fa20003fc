package io.ticketing;

import io.ticketing.internal.CoordTransport;
import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/** The coordination client's view of a broker's connection layer. */
final class CoordBridge implements CoordTransport {
    private final Config cfg;
    private final Connector connector;
    private final Conn.Hooks hooks;

    CoordBridge(Config cfg, Connector connector, Conn.Hooks hooks) {
        this.cfg = cfg;
        this.connector = connector;
        this.hooks = hooks;
    }

    @Override
    public Link shared(long deadlineNanos, String op) throws InterruptedException {
        return new ConnLink(connector.getConn(deadlineNanos, false, op, "within the wait"), false);
    }

    @Override
    public Link dedicated(long deadlineNanos, String op) throws InterruptedException {
        Conn leader = connector.getConn(deadlineNanos, false, op, "within the wait");
        try {
            return new ConnLink(Conn.dial(leader.addr, cfg, 0, hooks), true);
        } catch (Conn.HelloException e) {
            throw new UnavailableException(op + ": a connection of the session's own to " + leader.addr + " failed: " + e.getMessage());
        }
    }

    @Override
    public long answerGraceMs() {
        return cfg.answerGraceMs;
    }

    @Override
    public RuntimeException unavailable(String message) {
        return new UnavailableException(message);
    }

    @Override
    public RuntimeException indeterminate(String message) {
        return new IndeterminateException(message, null, 0, false);
    }

    @Override
    public RuntimeException closed(String message) {
        return new ClosedException(message);
    }

    @Override
    public RuntimeException capacity(String message, int reason) {
        return new CapacityException(message + " (" + CapacityException.reasonName(reason) + ")", reason);
    }

    @Override
    public RuntimeException notAcquired(String message) {
        return new NotAcquiredException(message);
    }

    /** One connection; own: a session's, closed with it. */
    private record ConnLink(Conn c, boolean own) implements Link {
        @Override
        public boolean sessions() {
            return c.readySessions;
        }

        @Override
        public String addr() {
            return c.addr;
        }

        @Override
        public CompletableFuture<?> done() {
            return c.done;
        }

        @Override
        public boolean endedByServer() {
            Conn.Failure f = c.failure();
            return f != null && f.kind() == Conn.Kind.SERVER_ERROR;
        }

        @Override
        public Exchange send(int op, byte[] body, int dataLen, Consumer<Frame> note) throws InterruptedException {
            Conn.Call cl = new Conn.Call(Type.COORD, "", null);
            cl.large = dataLen > Conn.LARGE_REQUEST;
            cl.coordOp = op;
            cl.note = note;
            Frame f = new Frame(Type.COORD);
            f.op = op;
            f.text = body;
            if (c.start(cl, f, Long.MAX_VALUE) != Conn.Start.OK) {
                return null;
            }
            CompletableFuture<Reply> reply = cl.res.thenApply(a -> {
                if (a.fail() != null) {
                    return null;
                }
                Frame t = a.frame();
                if (t.type == Type.CAPACITY) {
                    return new Reply(0, op, new byte[0], true, t.reason);
                }
                return new Reply(t.code, t.op, t.text, false, 0);
            });
            return new Exchange(cl.id, cl.sentNanos, reply);
        }

        @Override
        public void listen(Consumer<Frame> l) {
            c.addCoordListener(l);
        }

        @Override
        public void unlisten(Consumer<Frame> l) {
            c.removeCoordListener(l);
        }

        @Override
        public void close() {
            if (own) {
                c.fail(new Conn.Failure(Conn.Kind.CLOSED, c.addr, "", 0, ""));
            }
        }
    }
}
