package io.ticketing;

import io.ticketing.wire.Codec;
import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import io.ticketing.wire.WireException;
import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import javax.net.ssl.SSLContext;
import javax.net.ssl.SSLException;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;

/**
 * One established session with a server: a reader thread, a writer thread
 * that coalesces every queued frame into one write, and the table of pending
 * requests. Only ReentrantLock is used around shared state (never
 * {@code synchronized}), and no lock is held during socket I/O, so callers on
 * virtual threads never pin their carrier.
 */
final class Conn {
    /**
     * The server counts acquires ({@code A}) and other requests ({@code L},
     * {@code U}, {@code D}, {@code J}) separately against the {@code count}
     * of {@code Y}, and so does the client, so that acquires waiting in
     * queues never keep releases and describes from being sent.
     */
    static final boolean SEPARATE_IN_FLIGHT_CLASSES = true;

    /** Client ping interval when the server sends no pings ({@code Y} interval 0). */
    static final long CLIENT_PING_MS = 500;

    private final long clientPingMs;

    /** Why a connection ended; every request pending on it gets this. */
    enum Kind { DROP, SILENT, NOT_LEADER, SERVER_ERROR, PROTOCOL, CLOSED }

    record Failure(Kind kind, String addr, String hint, int code, String detail) {
        String what() {
            return switch (kind) {
                case SILENT -> "the server " + addr + " sent nothing for " + detail + " (3 ping intervals, or idle intervals while nothing was in flight) and the connection was given up";
                case NOT_LEADER -> hint.isEmpty()
                        ? "the server " + addr + " stopped being the leader and ended the session"
                        : "the server " + addr + " stopped being the leader (new leader " + hint + ") and ended the session";
                case SERVER_ERROR -> "the server " + addr + " ended the session with error code " + code + " (" + detail + ")";
                case PROTOCOL -> "the server " + addr + " sent an invalid frame (" + detail + ") and the connection was closed";
                case CLOSED -> "the broker was closed";
                case DROP -> "the connection to " + addr + " was lost (" + detail + ")";
            };
        }

        boolean closed() {
            return kind == Kind.CLOSED;
        }

        /**
         * Whether the server ended the session because it is stopping
         * ({@code E} 11): a draining leader answered everything it proposed,
         * so an acquire still pending was not granted, or (from a server that
         * does not drain) was granted to its owner, which the same acquire
         * sent again gets back (docs/protocol.md, How a connection ends).
         */
        boolean shuttingDown() {
            return kind == Kind.SERVER_ERROR && code == io.ticketing.wire.ErrorCode.SHUTTING_DOWN;
        }
    }

    /** A final answer or the failure that ended the connection. */
    record Answer(Frame frame, Failure fail) {}

    /** One request waiting for its final answer. */
    static final class Call {
        final byte type;
        final String key;
        final byte[] owner;
        long id;
        long sentNanos;
        boolean abandoned; // the caller left; a late G is released (acquire)
        boolean queued; // a Q was seen
        long spanNanos; // acquire: wait + 2 x lease, the longest a grant of it can matter
        Semaphore slot; // the in-flight slot it holds, if any
        int coordOp; // K: the sub-op
        boolean large; // K with more than LARGE_REQUEST bytes of data: holds the large slot until its first answer
        java.util.function.Consumer<Frame> note; // K: its notifications (Queued, Changed), on the reader
        final CompletableFuture<Answer> res = new CompletableFuture<>();

        Call(byte type, String key, byte[] owner) {
            this.type = type;
            this.key = key;
            this.owner = owner;
        }
    }

    /** Connects a connection to its broker. */
    interface Hooks {
        /** Called on the reader thread for a G that answers an acquire whose caller left. */
        void lateGrant(String key, long token);

        /**
         * Called once, when the connection ends (not by close), for every
         * acquire sent on it without a final answer: a grant it may have got
         * can only be ended by its owner ({@code U}) from now on.
         */
        void orphaned(String key, byte[] owner, long untilNanos);
    }

    /** A failed handshake. {@code rejected}: a refusal that will not go away by itself (reported promptly). */
    static final class HelloException extends Exception {
        final TicketingException error;
        final String hint;
        final boolean rejected;

        HelloException(TicketingException error, String hint, boolean rejected) {
            super(error.getMessage(), error);
            this.error = error;
            this.hint = hint;
            this.rejected = rejected;
        }
    }

    enum Start { OK, GONE, TIMEOUT }

    final String addr;
    final String nodeId;
    final long intervalMs;
    /**
     * The server's idle ping interval (Y with READY_IDLE_PINGS), 0 without:
     * while nothing is pending and no coordination request was ever sent,
     * the server pings this often and the silence bound is 3 of these.
     */
    final long idleIntervalMs;
    /** When the connection last became busy (System.nanoTime), under mu. */
    private long busySince;
    final long maxInFlight;
    final long bornNanos = System.nanoTime();
    private final Socket sock;
    private final InputStream in;
    private LiveInput live; // set before the threads start
    private final OutputStream out;
    private final Hooks hooks;
    private final Semaphore acquireSlots;
    private final Semaphore otherSlots;

    private final ReentrantLock mu = new ReentrantLock();
    private final Condition wsig = mu.newCondition();
    private byte[] wbuf = new byte[4096];
    private int wlen;
    private final Map<Long, Call> pending = new HashMap<>();
    /**
     * Set once a coordination request was sent: from then on T frames may
     * be longer than the transport's 65536 bytes (a ticket-only connection
     * keeps that bound, and refuses a longer prefix without reading on).
     */
    private volatile boolean coordFrames;
    /**
     * A request with more data than this takes the connection's one large
     * slot before it is queued, until its first answer: frames go out whole
     * and in order, so on a slow link small frames (pings, keep-alives)
     * then wait behind one large frame at most.
     */
    static final int LARGE_REQUEST = 64 << 10;
    private final Semaphore largeSlot = new Semaphore(1);
    /** Ready flag: the server carries several coordination sessions on this connection. */
    final boolean readySessions;
    /** Receivers of coordination notifications that answer no pending request (id 0, a watch's Changed); called on the reader. */
    private final List<java.util.function.Consumer<Frame>> coordListeners = new java.util.concurrent.CopyOnWriteArrayList<>();
    private long nextId;
    private Failure failure;
    final CompletableFuture<Failure> done = new CompletableFuture<>();

    private Conn(String addr, Socket sock, InputStream in, Frame ready, Hooks hooks, long clientPingMs) throws IOException {
        this.addr = addr;
        this.clientPingMs = clientPingMs;
        this.sock = sock;
        this.in = in;
        this.out = sock.getOutputStream();
        this.hooks = hooks;
        this.nodeId = new String(ready.text, java.nio.charset.StandardCharsets.UTF_8);
        this.intervalMs = ready.intervalMs;
        this.idleIntervalMs = ready.intervalMs > 0 && (ready.flags & Type.READY_IDLE_PINGS) != 0 && ready.idleIntervalMs > ready.intervalMs
                ? ready.idleIntervalMs : 0;
        this.maxInFlight = ready.count;
        this.readySessions = (ready.flags & Type.READY_SESSIONS) != 0;
        if (ready.count == 0) {
            acquireSlots = otherSlots = null;
        } else {
            int n = (int) Math.min(ready.count, 1 << 24);
            acquireSlots = new Semaphore(n);
            otherSlots = SEPARATE_IN_FLIGHT_CLASSES ? new Semaphore(n) : acquireSlots;
        }
    }

    /** How long the server may stay silent before a busy connection is considered dead: 3 ping intervals. */
    long silenceMs() {
        return 3 * (intervalMs > 0 ? intervalMs : clientPingMs);
    }

    /** LiveInput's bound: 3 idle intervals after the last byte while idle, else 3 ping intervals after the later of the last byte and becoming busy. */
    private long deadlineNanos(long lastByte) {
        mu.lock();
        try {
            if (idleIntervalMs > 0 && pending.isEmpty() && !coordFrames) {
                return lastByte + 3 * idleIntervalMs * 1_000_000;
            }
            return Math.max(lastByte, busySince) + silenceMs() * 1_000_000;
        } finally {
            mu.unlock();
        }
    }

    /**
     * Connects to addr, runs TLS and the hello, and starts the reader and
     * writer threads. Throws HelloException for a refusal or failure.
     */
    static Conn dial(String addr, Config cfg, int helloFlags, Hooks hooks) throws HelloException {
        HostPort hp = HostPort.parse(addr);
        Socket s = null;
        try {
            s = new Socket();
            s.setTcpNoDelay(true);
            s.setKeepAlive(true);
            s.connect(new InetSocketAddress(hp.host(), hp.port()), (int) cfg.dialTimeoutMs);
            s.setSoTimeout((int) cfg.dialTimeoutMs);
            if (cfg.ssl != null) {
                s = startTls(s, hp, cfg);
            }
            LiveInput live = new LiveInput(s);
            InputStream in = new BufferedInputStream(live, 64 * 1024);
            Frame h = new Frame(Type.HELLO);
            h.version = Type.VERSION;
            h.flags = helloFlags | Type.HELLO_CLUSTER_ID | Type.HELLO_IDLE_PINGS;
            h.text = cfg.token.getBytes(java.nio.charset.StandardCharsets.UTF_8);
            OutputStream o = s.getOutputStream();
            IOException writeErr = null;
            try {
                o.write(Codec.encode(h));
                o.flush();
            } catch (IOException e) {
                writeErr = e; // the server may still have said why it refused us
            }
            Frame f;
            try {
                f = Codec.read(in);
            } catch (IOException | WireException e) {
                if (writeErr != null) {
                    throw writeErr;
                }
                if (e instanceof EOFException && cfg.ssl == null && speaksTls(hp, cfg)) {
                    throw new HelloException(new UnavailableException("the server " + addr + " closed the plain connection and answers a "
                            + "TLS handshake: it expects TLS; configure it (TlsMode.ca(...), TlsMode.systemRoots())"), "", true);
                }
                if (e instanceof WireException we) {
                    throw new HelloException(new UnavailableException("the server " + addr + " answered the hello with an invalid frame ("
                            + we.getMessage() + "); is it a Ticketing server, and is TLS (" + cfg.tlsMode + ") configured on both sides alike?"), "", true);
                }
                throw (IOException) e;
            }
            Conn c = null;
            switch (f.type) {
                case Type.READY -> {
                    WrongClusterException wrong = cfg.pin.check(addr, f);
                    if (wrong != null) {
                        throw new HelloException(wrong, "", true);
                    }
                    c = new Conn(addr, s, in, f, hooks, cfg.clientPingMs);
                }
                case Type.NOT_LEADER -> {
                    String hint = new String(f.text, java.nio.charset.StandardCharsets.UTF_8);
                    throw new HelloException(new UnavailableException("the server " + addr + " is not the leader"
                            + (hint.isEmpty() ? " and does not know the leader yet" : " (the leader is " + hint + ")")), hint, false);
                }
                case Type.ERROR -> {
                    String msg = "the server " + addr + " refused the hello with error code " + f.code + ": "
                            + new String(f.text, java.nio.charset.StandardCharsets.UTF_8);
                    if (f.code == io.ticketing.wire.ErrorCode.UNAUTHENTICATED) {
                        throw new HelloException(new UnauthenticatedException(msg + "; fix the configured token", null, f.code), "", true);
                    }
                    boolean rej = f.code == io.ticketing.wire.ErrorCode.UNSUPPORTED_VERSION || f.code == io.ticketing.wire.ErrorCode.INVALID_ARGUMENT;
                    throw new HelloException(new UnavailableException(msg, null, f.code), "", rej);
                }
                case Type.CAPACITY -> throw new HelloException(new UnavailableException("the server " + addr
                        + " refused the connection: " + CapacityException.reasonName(f.reason) + "; the broker retries with backoff"), "", true);
                default -> throw new HelloException(new UnavailableException("the server " + addr
                        + " answered the hello with an unexpected " + Type.name(f.type) + " frame"), "", false);
            }
            Conn conn = c;
            live.bound(new LiveInput.Bound() {
                @Override
                public long deadlineNanos(long lastByte) {
                    return conn.deadlineNanos(lastByte);
                }

                @Override
                public long busyMs() {
                    return conn.silenceMs();
                }
            });
            c.live = live;
            c.startThreads();
            return c;
        } catch (HelloException e) {
            closeQuietly(s);
            throw e;
        } catch (SSLException e) {
            closeQuietly(s);
            String m = String.valueOf(e.getMessage());
            // The server's alert says it refused (or wanted) our client certificate.
            boolean clientCertRefused = m.contains("certificate_required")
                    || (cfg.tlsMode.hasClientCert() && (m.contains("bad_certificate") || m.contains("unknown_ca") || m.contains("certificate_unknown")));
            if (clientCertRefused) {
                throw new HelloException(new UnauthenticatedException("the server " + addr + " refused the client certificate (or requires one): " + m, e, 0), "", true);
            }
            throw new HelloException(new UnavailableException("TLS handshake with " + addr + " failed (" + m
                    + "); check the TLS mode (" + cfg.tlsMode + ") and that the server speaks TLS", e, 0), "", true);
        } catch (IOException e) {
            closeQuietly(s);
            throw new HelloException(new UnavailableException("cannot connect to " + addr + ": " + e, e, 0), "", false);
        }
    }

    /**
     * Whether the server at hp completes a TLS handshake (any certificate):
     * used to explain a plain connection that a server closed at once.
     */
    private static boolean speaksTls(HostPort hp, Config cfg) {
        try {
            SSLContext ctx = TlsMode.InsecureSkipVerify.build();
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(hp.host(), hp.port()), (int) cfg.dialTimeoutMs);
                s.setSoTimeout((int) cfg.dialTimeoutMs);
                try (SSLSocket t = (SSLSocket) ctx.getSocketFactory().createSocket(s, hp.host(), hp.port(), true)) {
                    t.startHandshake();
                    return true;
                }
            }
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private static Socket startTls(Socket plain, HostPort hp, Config cfg) throws IOException {
        SSLContext ctx = cfg.ssl;
        SSLSocket t = (SSLSocket) ctx.getSocketFactory().createSocket(plain, hp.host(), hp.port(), true);
        SSLParameters p = t.getSSLParameters();
        if (cfg.tlsMode.verifiesHost()) {
            p.setEndpointIdentificationAlgorithm("HTTPS");
        }
        t.setSSLParameters(p);
        t.setUseClientMode(true);
        t.startHandshake();
        return t;
    }

    private void startThreads() {
        Threads.start("ticketing-reader-" + addr, this::readLoop);
        Threads.start("ticketing-writer-" + addr, this::writeLoop);
        if (intervalMs == 0) {
            Threads.start("ticketing-pinger-" + addr, this::pingLoop);
        }
    }

    private void readLoop() {
        while (true) {
            Frame f;
            try {
                f = Codec.read(in, () -> coordFrames);
            } catch (SocketTimeoutException e) {
                fail(new Failure(Kind.SILENT, addr, "", 0, live.quietMs + " ms"));
                return;
            } catch (WireException e) {
                fail(new Failure(Kind.PROTOCOL, addr, "", 0, e.getMessage()));
                return;
            } catch (EOFException e) {
                fail(new Failure(Kind.DROP, addr, "", 0, "closed by the server"));
                return;
            } catch (IOException e) {
                fail(new Failure(Kind.DROP, addr, "", 0, String.valueOf(e.getMessage())));
                return;
            }
            Failure fl = dispatch(f);
            if (fl != null) {
                fail(fl);
                return;
            }
        }
    }

    /** Handles one received frame; a non-null result ends the connection. */
    private Failure dispatch(Frame f) {
        switch (f.type) {
            case Type.PING -> {
                Frame o = new Frame(Type.PONG);
                o.nonce = f.nonce;
                queue(Codec.encode(o));
                return null;
            }
            case Type.PONG -> {
                return null;
            }
            case Type.NOT_LEADER -> {
                return new Failure(Kind.NOT_LEADER, addr, new String(f.text, java.nio.charset.StandardCharsets.UTF_8), 0, "");
            }
            case Type.ERROR -> {
                return new Failure(Kind.SERVER_ERROR, addr, "", f.code, new String(f.text, java.nio.charset.StandardCharsets.UTF_8));
            }
            case Type.GRANTED, Type.NOT_ACQUIRED, Type.QUEUED, Type.CANCELLED, Type.CAPACITY, Type.RELEASED, Type.NOT_HELD,
                    Type.INFO, Type.ADMIN_REPLY, Type.FORBIDDEN -> {
                // answers: below
            }
            case Type.COORD_REPLY -> {
                if (f.op >= io.ticketing.wire.Coord.QUEUED) {
                    coordNotification(f);
                    return null;
                }
            }
            default -> {
                return new Failure(Kind.PROTOCOL, addr, "", 0, "unexpected " + Type.name(f.type) + " frame from the server");
            }
        }
        Call cl;
        mu.lock();
        try {
            cl = pending.get(f.id);
            if (cl == null) {
                return new Failure(Kind.PROTOCOL, addr, "", 0, Type.name(f.type) + " frame for request id " + f.id + ", which is not in flight");
            }
            if (!answers(cl.type, f.type)) {
                return new Failure(Kind.PROTOCOL, addr, "", 0, Type.name(f.type) + " frame answers request id " + f.id + ", which is a " + Type.name(cl.type));
            }
            if (f.type == Type.QUEUED) {
                if (cl.queued) {
                    return new Failure(Kind.PROTOCOL, addr, "", 0, "second Q frame for request id " + f.id);
                }
                cl.queued = true;
                return null;
            }
            pending.remove(f.id);
            if (cl.slot != null) {
                cl.slot.release();
            }
            freeLargeLocked(cl);
        } finally {
            mu.unlock();
        }
        if (cl.abandoned) {
            if (f.type == Type.GRANTED && cl.type == Type.ACQUIRE && hooks != null) {
                hooks.lateGrant(cl.key, f.token);
            }
            return null;
        }
        cl.res.complete(new Answer(f, null));
        return null;
    }

    /**
     * A coordination notification is never final: one with the id of a
     * pending request goes to that request (an acquire's Queued), any other
     * (id 0, or a watch's Changed after its describe was answered) to the
     * connection's listeners.
     */
    private void coordNotification(Frame f) {
        Call cl = null;
        mu.lock();
        try {
            if (f.id != 0) {
                cl = pending.get(f.id);
            }
        } finally {
            mu.unlock();
        }
        if (cl != null) {
            freeLarge(cl); // the server has read all of it
        }
        if (cl != null && cl.type == Type.COORD && cl.note != null) {
            cl.note.accept(f);
            return;
        }
        for (java.util.function.Consumer<Frame> l : coordListeners) {
            try {
                l.accept(f);
            } catch (RuntimeException e) {
                // a listener's failure must not end the reader, which other requests depend on
                Reporter.LOG.log(System.Logger.Level.WARNING, "ticketing: a coordination notification listener failed: {0}", e.toString());
            }
        }
    }

    private void freeLarge(Call cl) {
        mu.lock();
        try {
            freeLargeLocked(cl);
        } finally {
            mu.unlock();
        }
    }

    /** Gives the large slot back once cl's request was answered or its connection ended; mu is held. */
    private void freeLargeLocked(Call cl) {
        if (cl.large) {
            cl.large = false;
            largeSlot.release();
        }
    }

    void addCoordListener(java.util.function.Consumer<Frame> l) {
        coordListeners.add(l);
    }

    void removeCoordListener(java.util.function.Consumer<Frame> l) {
        coordListeners.remove(l);
    }

    /** Whether an answer of type a may answer a request of type r. */
    static boolean answers(byte r, byte a) {
        if (a == Type.FORBIDDEN) { // a refusal is the final answer of any request but C
            return r == Type.ACQUIRE || r == Type.RELEASE || r == Type.RELEASE_OWNER || r == Type.DESCRIBE || r == Type.ADMIN;
        }
        return switch (r) {
            case Type.ACQUIRE -> a == Type.GRANTED || a == Type.NOT_ACQUIRED || a == Type.QUEUED || a == Type.CANCELLED || a == Type.CAPACITY;
            case Type.RELEASE, Type.RELEASE_OWNER -> a == Type.RELEASED || a == Type.NOT_HELD || a == Type.CAPACITY;
            case Type.DESCRIBE -> a == Type.INFO || a == Type.CAPACITY;
            case Type.ADMIN -> a == Type.ADMIN_REPLY || a == Type.CAPACITY;
            case Type.COORD -> a == Type.COORD_REPLY || a == Type.CAPACITY;
            default -> false;
        };
    }

    /** Appends bytes for the writer; dropped when the connection has failed. */
    private void queue(byte[] b) {
        mu.lock();
        try {
            if (failure == null) {
                appendLocked(b);
                wsig.signal();
            }
        } finally {
            mu.unlock();
        }
    }

    private void appendLocked(byte[] b) {
        if (wlen + b.length > wbuf.length) {
            wbuf = java.util.Arrays.copyOf(wbuf, Math.max(wbuf.length * 2, wlen + b.length));
        }
        System.arraycopy(b, 0, wbuf, wlen, b.length);
        wlen += b.length;
    }

    /** Flushes everything queued since the last write in one write, so that under load many frames share a syscall. */
    private void writeLoop() {
        byte[] spare = new byte[4096];
        while (true) {
            byte[] buf;
            int n;
            mu.lock();
            try {
                while (wlen == 0 && failure == null) {
                    wsig.awaitUninterruptibly();
                }
                if (failure != null) {
                    return;
                }
                buf = wbuf;
                n = wlen;
                wbuf = spare;
                wlen = 0;
            } finally {
                mu.unlock();
            }
            try {
                out.write(buf, 0, n);
                out.flush();
            } catch (IOException e) {
                fail(new Failure(Kind.DROP, addr, "", 0, "write failed: " + e.getMessage()));
                return;
            }
            spare = buf.length > (256 << 10) ? new byte[4096] : buf;
        }
    }

    /** Sends our own pings when the server sends none, so that a silent server is detected. */
    private void pingLoop() {
        long nonce = 0;
        while (!done.isDone()) {
            try {
                done.get(clientPingMs, TimeUnit.MILLISECONDS);
                return;
            } catch (java.util.concurrent.TimeoutException e) {
                Frame p = new Frame(Type.PING);
                p.nonce = ++nonce;
                queue(Codec.encode(p));
            } catch (Exception e) {
                return;
            }
        }
    }

    /** Ends the connection once; every pending caller gets f. */
    void fail(Failure f) {
        List<Call> pend;
        mu.lock();
        try {
            if (failure != null) {
                return;
            }
            failure = f;
            pend = new ArrayList<>(pending.values());
            pending.clear();
            wlen = 0;
            wsig.signalAll();
        } finally {
            mu.unlock();
        }
        closeQuietly(sock);
        for (Call cl : pend) {
            if (cl.slot != null) {
                cl.slot.release();
            }
            mu.lock();
            try {
                freeLargeLocked(cl);
            } finally {
                mu.unlock();
            }
            // Before the caller hears of it: an IndeterminateException then
            // always has its release by owner under way. An acquire a
            // stopping server interrupted is sent again by its caller, who
            // releases by owner itself if it cannot be.
            if (cl.type == Type.ACQUIRE && !f.closed() && (!f.shuttingDown() || cl.abandoned) && hooks != null) {
                hooks.orphaned(cl.key, cl.owner, cl.sentNanos + cl.spanNanos);
            }
            if (!cl.abandoned) {
                cl.res.complete(new Answer(null, f));
            }
        }
        done.complete(f);
    }

    boolean dead() {
        return done.isDone();
    }

    Failure failure() {
        return done.getNow(null);
    }

    /**
     * Registers cl and queues f for the writer. GONE: the connection ended
     * before anything was queued (nothing was sent). TIMEOUT: no in-flight
     * slot freed before deadlineNanos. Once it returns OK the request may
     * have been sent.
     *
     * @throws InterruptedException while waiting for a slot; nothing was sent
     */
    Start start(Call cl, Frame f, long deadlineNanos) throws InterruptedException {
        boolean acquire = cl.type == Type.ACQUIRE
                || cl.type == Type.COORD && (cl.coordOp & ~io.ticketing.wire.Coord.FOR_SESSION) == io.ticketing.wire.Coord.ACQUIRE;
        Semaphore slot = acquire ? acquireSlots : otherSlots;
        boolean large = cl.large;
        cl.large = false; // set again once the slot is held
        if (large && !largeSlot.tryAcquire(Math.max(deadlineNanos - System.nanoTime(), 0), TimeUnit.NANOSECONDS)) {
            return dead() ? Start.GONE : Start.TIMEOUT;
        }
        if (slot != null && !slot.tryAcquire()) {
            long wait = deadlineNanos - System.nanoTime();
            boolean got;
            try {
                got = slot.tryAcquire(Math.max(wait, 0), TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                if (large) {
                    largeSlot.release();
                }
                throw e;
            }
            if (!got) {
                if (large) {
                    largeSlot.release();
                }
                return dead() ? Start.GONE : Start.TIMEOUT;
            }
        }
        mu.lock();
        try {
            if (failure != null) {
                if (slot != null) {
                    slot.release();
                }
                if (large) {
                    largeSlot.release();
                }
                return Start.GONE;
            }
            cl.large = large;
            do {
                nextId = (nextId + 1) & 0xffffffffL;
            } while (nextId == 0 || pending.containsKey(nextId));
            cl.id = nextId;
            cl.slot = slot;
            if (pending.isEmpty()) {
                busySince = System.nanoTime(); // the server pings every interval from this request on
            }
            if (cl.type == Type.COORD) {
                coordFrames = true;
            }
            f.id = cl.id;
            pending.put(cl.id, cl);
            cl.sentNanos = System.nanoTime();
            appendLocked(Codec.encode(f));
            wsig.signal();
        } finally {
            mu.unlock();
        }
        return Start.OK;
    }

    /**
     * Called when cl's caller stops waiting. If cl is still pending it is
     * marked abandoned (a late G is released by the owner) and, for an
     * acquire, a C frame is queued; returns null. If the answer already
     * arrived (or the connection failed), returns it.
     */
    Answer abandon(Call cl) {
        mu.lock();
        try {
            if (failure == null && pending.get(cl.id) == cl) {
                cl.abandoned = true;
                if (cl.type == Type.ACQUIRE) {
                    Frame c = new Frame(Type.CANCEL);
                    c.id = cl.id;
                    c.owner = cl.owner;
                    appendLocked(Codec.encode(c));
                    wsig.signal();
                }
                return null;
            }
        } finally {
            mu.unlock();
        }
        return cl.res.join();
    }

    /** Test hook: callers waiting for an in-flight slot. */
    int slotWaiters() {
        return acquireSlots == null ? 0 : acquireSlots.getQueueLength() + (otherSlots != acquireSlots ? otherSlots.getQueueLength() : 0);
    }

    static void closeQuietly(Socket s) {
        if (s != null) {
            try {
                s.close();
            } catch (IOException ignored) {
                // closing is best effort
            }
        }
    }
}
