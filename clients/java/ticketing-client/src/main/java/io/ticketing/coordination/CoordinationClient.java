package io.ticketing.coordination;

import io.ticketing.TicketBroker;
import io.ticketing.internal.Brokers;
import io.ticketing.internal.CoordTransport;
import io.ticketing.wire.Coord;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

/**
 * The coordination client over a broker's connection: node requests go on
 * the broker's connection to the leader, and so do sessions when the
 * server carries several sessions on one connection (an older server: a
 * connection of the session's own to the same leader). Closing it does not
 * close the broker; closing the broker ends its sessions.
 */
public final class CoordinationClient implements AutoCloseable {
    final CoordTransport transport;
    final ExecutorService executor;
    private volatile boolean closed;

    private CoordinationClient(CoordTransport transport) {
        this.transport = transport;
        this.executor = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "ticketing-coordination");
            t.setDaemon(true);
            return t;
        });
    }

    /**
     * A coordination client over broker's connection.
     *
     * @param broker the broker whose connection the client uses
     * @return the client
     */
    public static CoordinationClient create(TicketBroker broker) {
        return new CoordinationClient(Brokers.transport(broker));
    }

    /**
     * Node requests and new sessions fail with ClosedException; sessions are
     * closed separately (their keep-alives and notifications go on, on the
     * client's daemon threads, which end when idle).
     */
    @Override
    public void close() {
        closed = true;
    }

    static void checkSize(String op, String field, int n, int max) {
        if (n > max) {
            throw new BadRequestException("coordination: " + op + ": BAD_REQUEST: " + field + ": " + n + " bytes, at most " + max
                    + " (refused before sending: nothing was sent)");
        }
    }

    private Coord nodeCall(String what, int op, Coord body, boolean safe) {
        checkSize(what, "path", body.path.length, Coord.MAX_PATH);
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(transport.answerGraceMs());
        int losses = 0;
        try {
            while (true) {
                if (closed) {
                    throw transport.closed("coordination: " + what + ": the client is closed");
                }
                CoordTransport.Link l = transport.shared(deadline, "coordination: " + what);
                CoordTransport.Exchange ex = l.send(op, body.encode(false, op, 0), body.data.length, null);
                CoordTransport.Reply r = ex == null ? null : Attachment.await(ex.reply(), deadline, transport, what);
                if (r == null) {
                    if (ex != null && l.endedByServer()) {
                        losses++;
                    }
                    if (safe && losses < 2) {
                        continue;
                    }
                    if (ex == null) {
                        continue; // nothing was sent
                    }
                    throw transport.indeterminate("coordination: " + what + ": the connection was lost before the answer");
                }
                if (r.capacity()) {
                    throw transport.capacity("coordination: " + what + ": rejected by a server capacity limit", r.reason());
                }
                Coord ans = Coord.decode(true, r.op(), r.status(), r.body());
                if (r.status() != Coord.SUCCESS) {
                    throw StatusException.of(what, r.status(), new String(ans.message, StandardCharsets.UTF_8));
                }
                return ans;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new java.util.concurrent.CancellationException("coordination: " + what + ": interrupted");
        } catch (io.ticketing.wire.WireException e) {
            throw transport.indeterminate("coordination: " + what + ": malformed answer: " + e.getMessage());
        }
    }

    private static Coord config(String path, NodeConfig c) {
        Coord b = new Coord();
        b.path = path.getBytes(StandardCharsets.UTF_8);
        b.selfCheckMs = c.selfCheck().toMillis();
        b.graceMs = c.sessionGrace().toMillis();
        b.readMode = c.readMode();
        b.attachMode = c.attachMode();
        b.maxSessions = c.maxSessions();
        b.maxSemaphores = c.maxSemaphores();
        b.maxWaiters = c.maxWaiters();
        return b;
    }

    private static Coord pathBody(String path) {
        Coord b = new Coord();
        b.path = path.getBytes(StandardCharsets.UTF_8);
        return b;
    }

    /**
     * Creates the node at path.
     *
     * @param path the node's path
     * @param config the node's configuration
     */
    public void createNodeBlocking(String path, NodeConfig config) {
        nodeCall("create node " + path, Coord.CREATE_NODE, config(path, config), false);
    }

    /**
     * Changes the given (non-zero) fields of the node's configuration.
     *
     * @param path the node's path
     * @param config the fields to change; zero fields are left as they are
     */
    public void alterNodeBlocking(String path, NodeConfig config) {
        nodeCall("alter node " + path, Coord.ALTER_NODE, config(path, config), false);
    }

    /**
     * Drops the node; its sessions end.
     *
     * @param path the node's path
     */
    public void dropNodeBlocking(String path) {
        nodeCall("drop node " + path, Coord.DROP_NODE, pathBody(path), false);
    }

    /**
     * The node's configuration and sizes.
     *
     * @param path the node's path
     * @return the node's configuration and its counts of sessions, semaphores and waiters
     */
    public NodeDescription describeNodeBlocking(String path) {
        Coord a = nodeCall("describe node " + path, Coord.DESCRIBE_NODE, pathBody(path), true);
        return new NodeDescription(new NodeConfig(Duration.ofMillis(a.selfCheckMs), Duration.ofMillis(a.graceMs), a.readMode, a.attachMode,
                a.maxSessions, a.maxSemaphores, a.maxWaiters), a.sessions, a.semaphores, a.waiters);
    }

    /**
     * One session of a node, as {@link #listSessionsBlocking} reports it.
     *
     * @param id the session's id
     * @param seqNo the highest attach sequence number it has seen
     * @param timeout its timeout
     * @param attached whether a connection is attached to it now (else it is restorable until it expires)
     * @param description its description
     */
    public record SessionInfo(long id, long seqNo, Duration timeout, boolean attached, String description) {}

    /**
     * The node's sessions by id. It asks page by page (each answer is at
     * most about 1 MiB); sessions that start or end while it pages may or
     * may not be included.
     *
     * @param path the node's path
     * @return the node's sessions
     */
    public List<SessionInfo> listSessionsBlocking(String path) {
        List<SessionInfo> out = new ArrayList<>();
        long after = 0;
        while (true) {
            Coord b = pathBody(path);
            b.after = after;
            Coord a = nodeCall("list sessions " + path, Coord.LIST_SESSIONS, b, true);
            for (Coord.SessionEntry e : a.list) {
                out.add(new SessionInfo(e.session(), e.seqNo(), Duration.ofMillis(e.timeoutMs()), (e.flags() & Coord.FLAG_ATTACHED) != 0,
                        new String(e.desc(), StandardCharsets.UTF_8)));
                after = e.session();
            }
            if ((a.flags & Coord.FLAG_MORE) == 0 || a.list.isEmpty()) {
                return List.copyOf(out);
            }
        }
    }

    /**
     * {@link #listSessionsBlocking} on the client's threads.
     *
     * @param path the node's path
     * @return the node's sessions
     */
    public CompletableFuture<List<SessionInfo>> listSessionsAsync(String path) {
        return CompletableFuture.supplyAsync(() -> listSessionsBlocking(path), executor);
    }

    /**
     * {@link #createNodeBlocking} on the client's threads.
     *
     * @param path the node's path
     * @param config the node's configuration
     * @return completes when the node is created
     */
    public CompletableFuture<Void> createNodeAsync(String path, NodeConfig config) {
        return CompletableFuture.runAsync(() -> createNodeBlocking(path, config), executor);
    }

    /**
     * {@link #alterNodeBlocking} on the client's threads.
     *
     * @param path the node's path
     * @param config the fields to change; zero fields are left as they are
     * @return completes when the configuration is changed
     */
    public CompletableFuture<Void> alterNodeAsync(String path, NodeConfig config) {
        return CompletableFuture.runAsync(() -> alterNodeBlocking(path, config), executor);
    }

    /**
     * {@link #dropNodeBlocking} on the client's threads.
     *
     * @param path the node's path
     * @return completes when the node is dropped
     */
    public CompletableFuture<Void> dropNodeAsync(String path) {
        return CompletableFuture.runAsync(() -> dropNodeBlocking(path), executor);
    }

    /**
     * {@link #describeNodeBlocking} on the client's threads.
     *
     * @param path the node's path
     * @return the node's configuration and sizes
     */
    public CompletableFuture<NodeDescription> describeNodeAsync(String path) {
        return CompletableFuture.supplyAsync(() -> describeNodeBlocking(path), executor);
    }

    /**
     * Starts a session on the node at path with the given timeout (how long
     * it survives a lost connection: 500 ms to 30 min) and description.
     *
     * @param path the node's path
     * @param timeout how long the session survives a lost connection: 500 ms to 30 min
     * @param description the session's description
     * @return the attached session
     */
    public Session sessionBlocking(String path, Duration timeout, String description) {
        if (closed) {
            throw transport.closed("coordination: start session on " + path + ": the client is closed");
        }
        return Session.start(this, path, timeout, description);
    }

    /**
     * {@link #sessionBlocking} on the client's threads.
     *
     * @param path the node's path
     * @param timeout how long the session survives a lost connection: 500 ms to 30 min
     * @param description the session's description
     * @return the attached session
     */
    public CompletableFuture<Session> sessionAsync(String path, Duration timeout, String description) {
        return CompletableFuture.supplyAsync(() -> sessionBlocking(path, timeout, description), executor);
    }
}
