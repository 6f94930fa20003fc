package io.ticketing.internal;

import io.ticketing.wire.Frame;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The broker's connection layer as the coordination client uses it (not
 * exported): the broker's connection to the leader, and connections of a
 * session's own for servers that carry one session per connection.
 */
public interface CoordTransport {
    /**
     * The broker's current connection, waiting for one until deadlineNanos.
     *
     * @throws io.ticketing.ClosedException when the broker is closed
     * @throws io.ticketing.UnavailableException when none came in time
     */
    Link shared(long deadlineNanos, String op) throws InterruptedException;

    /** A new connection of its own to the broker's leader, for one session of a server without ReadySessions. */
    Link dedicated(long deadlineNanos, String op) throws InterruptedException;

    /** The least time a request waits for its answer on a live connection. */
    long answerGraceMs();

    /** The Ticketing client's exceptions, whose constructors are the client's own. */
    RuntimeException unavailable(String message);

    RuntimeException indeterminate(String message);

    RuntimeException closed(String message);

    RuntimeException capacity(String message, int reason);

    RuntimeException notAcquired(String message);

    /** One connection. */
    interface Link {
        /** Whether the server carries several sessions on this connection (ReadySessions). */
        boolean sessions();

        String addr();

        /** Completes when the connection has ended. */
        CompletableFuture<?> done();

        /** Whether the server ended the connection with E. */
        boolean endedByServer();

        /**
         * Sends a K request; null when the connection had ended before
         * anything was sent. dataLen is the size of its data: above 64 KiB
         * the request waits for the connection's one large slot. note
         * receives its notifications (on the reader: it must not block).
         */
        Exchange send(int op, byte[] body, int dataLen, Consumer<Frame> note) throws InterruptedException;

        /** Receives the notifications that answer no pending request (on the reader: must not block). */
        void listen(Consumer<Frame> l);

        void unlisten(Consumer<Frame> l);

        /** Closes a connection of a session's own (the broker's is never closed here). */
        void close();
    }

    /**
     * A request sent: the monotonic time read before it was queued, and its
     * final answer, or null in it when the connection was lost first.
     */
    record Exchange(long id, long sentNanos, CompletableFuture<Reply> reply) {}

    /** A final answer: a T (status and body), or a capacity refusal (B, with its reason). */
    record Reply(int status, int op, byte[] body, boolean capacity, int reason) {}
}
