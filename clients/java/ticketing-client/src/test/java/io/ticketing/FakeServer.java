package io.ticketing;

import io.ticketing.wire.Codec;
import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import io.ticketing.wire.WireException;
import java.io.BufferedInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Predicate;

/**
 * A scriptable fake Ticketing server for the rule tests: it speaks the real
 * codec on a loopback port, and each accepted connection runs the test's
 * script. Every frame received from the client is recorded, so that tests can
 * wait for (and count) what the client sent.
 */
final class FakeServer implements AutoCloseable {
    /** The script for one connection. n is the connection's number, from 1. */
    interface Script {
        void run(Session s, int n) throws Exception;
    }

    private final ServerSocket ss;
    private final Script script;
    private final List<Session> sessions = new CopyOnWriteArrayList<>();
    final AtomicInteger connections = new AtomicInteger();
    private final ReentrantLock mu = new ReentrantLock();
    private final java.util.concurrent.locks.Condition got = mu.newCondition();
    private final List<Frame> received = new ArrayList<>();
    private final List<Throwable> scriptErrors = new CopyOnWriteArrayList<>();

    FakeServer(Script script) throws IOException {
        this.ss = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        this.script = script;
        Threads.start("fake-accept", this::acceptLoop);
    }

    String addr() {
        return "127.0.0.1:" + ss.getLocalPort();
    }

    private void acceptLoop() {
        while (!ss.isClosed()) {
            Socket s;
            try {
                s = ss.accept();
            } catch (IOException e) {
                return;
            }
            int n = connections.incrementAndGet();
            Session se;
            try {
                se = new Session(s, n);
            } catch (IOException e) {
                continue;
            }
            sessions.add(se);
            Threads.start("fake-session-" + n, () -> {
                try {
                    script.run(se, n);
                } catch (Done d) {
                    // the client went away
                } catch (Throwable e) {
                    if (!ss.isClosed()) {
                        scriptErrors.add(e);
                    }
                } finally {
                    se.close();
                }
            });
        }
    }

    private void record(Frame f) {
        mu.lock();
        try {
            received.add(f);
            got.signalAll();
        } finally {
            mu.unlock();
        }
    }

    /** Frames received so far that match p. */
    List<Frame> received(Predicate<Frame> p) {
        mu.lock();
        try {
            return received.stream().filter(p).toList();
        } finally {
            mu.unlock();
        }
    }

    /** Waits (with a deadline) until at least n received frames match p; returns the first n. */
    List<Frame> await(int n, Predicate<Frame> p) throws InterruptedException {
        long end = System.nanoTime() + Duration.ofSeconds(20).toNanos();
        mu.lock();
        try {
            while (true) {
                List<Frame> l = received.stream().filter(p).toList();
                if (l.size() >= n) {
                    return l.subList(0, n);
                }
                long left = end - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError("timed out waiting for " + n + " matching frames; received: " + received);
                }
                got.awaitNanos(left);
            }
        } finally {
            mu.unlock();
        }
    }

    static Predicate<Frame> type(byte t) {
        return f -> f.type == t;
    }

    /** Fails the test if a script failed other than by the client leaving. */
    void checkScripts() {
        if (!scriptErrors.isEmpty()) {
            AssertionError e = new AssertionError("fake server script failed: " + scriptErrors.get(0), scriptErrors.get(0));
            throw e;
        }
    }

    @Override
    public void close() throws IOException {
        ss.close();
        for (Session s : sessions) {
            s.close();
        }
    }

    /** Thrown inside a script when the client closed the connection. */
    static final class Done extends RuntimeException {
        Done(String m) {
            super(m);
        }
    }

    /** One accepted connection. */
    final class Session {
        final Socket sock;
        final int n;
        private final InputStream in;
        private final OutputStream out;
        private final ReentrantLock wmu = new ReentrantLock();

        Session(Socket s, int n) throws IOException {
            this.sock = s;
            this.n = n;
            this.in = new BufferedInputStream(s.getInputStream());
            this.out = s.getOutputStream();
        }

        /** The next frame from the client (recorded); Done when it closed the connection. */
        Frame read() throws IOException, WireException {
            try {
                Frame f = Codec.read(in);
                record(f);
                return f;
            } catch (java.io.EOFException | java.net.SocketException e) {
                throw new Done("client closed: " + e.getMessage());
            }
        }

        /** The next frame that is not a pong (pongs are recorded too). */
        Frame readRequest() throws IOException, WireException {
            while (true) {
                Frame f = read();
                if (f.type != Type.PONG && f.type != Type.PING) {
                    return f;
                }
                if (f.type == Type.PING) {
                    Frame o = new Frame(Type.PONG);
                    o.nonce = f.nonce;
                    send(o);
                }
            }
        }

        /** Reads nothing for ms, returning the frame if one arrives (null otherwise). */
        Frame poll(long ms) throws IOException, WireException {
            sock.setSoTimeout((int) ms);
            try {
                return read();
            } catch (SocketTimeoutException e) {
                return null;
            } finally {
                sock.setSoTimeout(0);
            }
        }

        void send(Frame f) throws IOException {
            sendRaw(Codec.encode(f));
        }

        void sendRaw(byte[] b) throws IOException {
            wmu.lock();
            try {
                out.write(b);
                out.flush();
            } catch (java.net.SocketException e) {
                throw new Done("client closed: " + e.getMessage());
            } finally {
                wmu.unlock();
            }
        }

        /** Reads the H and answers Y (leader) with the given ping interval and in-flight count. */
        Frame hello(long intervalMs, long count) throws IOException, WireException {
            Frame h = read();
            if (h.type != Type.HELLO) {
                throw new AssertionError("first frame is " + Type.name(h.type) + ", not H");
            }
            Frame y = new Frame(Type.READY);
            y.version = 1;
            y.flags = Type.READY_LEADER;
            y.intervalMs = intervalMs;
            y.count = count;
            y.text = ("fake-" + n).getBytes(StandardCharsets.UTF_8);
            send(y);
            return h;
        }

        Frame hello() throws IOException, WireException {
            return hello(5000, 1024);
        }

        void close() {
            try {
                sock.close();
            } catch (IOException ignored) {
                // best effort
            }
        }
    }

    // ---- frames ----

    static Frame granted(long id, long token, long leaseMs, long queuedMs) {
        Frame f = new Frame(Type.GRANTED);
        f.id = id;
        f.token = token;
        f.leaseMs = leaseMs;
        f.queuedMs = queuedMs;
        return f;
    }

    static Frame idOnly(byte type, long id) {
        Frame f = new Frame(type);
        f.id = id;
        return f;
    }

    static Frame capacity(long id, int reason) {
        Frame f = new Frame(Type.CAPACITY);
        f.id = id;
        f.reason = reason;
        return f;
    }

    static Frame error(int code, String text) {
        Frame f = new Frame(Type.ERROR);
        f.code = code;
        f.text = text.getBytes(StandardCharsets.UTF_8);
        return f;
    }

    static Frame notLeader(String hint) {
        Frame f = new Frame(Type.NOT_LEADER);
        f.text = hint.getBytes(StandardCharsets.UTF_8);
        return f;
    }

    /**
     * A well-behaved single-node lock table shared by all connections of a
     * server: grants free keys (or the owner's own grant again), answers W
     * when held, releases exact tokens, describes keys, answers pings.
     */
    static final class Locks {
        private final ReentrantLock mu = new ReentrantLock();
        private final Map<String, long[]> held = new HashMap<>(); // key -> {token}
        private final Map<String, byte[]> owners = new HashMap<>();
        private long last;
        long leaseMs = -1; // -1: lease from the request

        /** Serves requests on s until the client leaves. */
        void serve(Session s) throws Exception {
            while (true) {
                Frame f = s.readRequest();
                Frame a = answer(f);
                if (a != null) {
                    s.send(a);
                }
            }
        }

        Frame answer(Frame f) {
            mu.lock();
            try {
                String key = new String(f.key, StandardCharsets.ISO_8859_1);
                switch (f.type) {
                    case Type.ACQUIRE -> {
                        long[] h = held.get(key);
                        if (h != null && !java.util.Arrays.equals(owners.get(key), f.owner)) {
                            return idOnly(Type.NOT_ACQUIRED, f.id);
                        }
                        if (h == null) {
                            h = new long[] {++last};
                            held.put(key, h);
                            owners.put(key, f.owner.clone());
                        }
                        return granted(f.id, h[0], leaseMs >= 0 ? leaseMs : f.leaseSec * 1000L, 0);
                    }
                    case Type.RELEASE -> {
                        long[] h = held.get(key);
                        if (h != null && h[0] == f.token) {
                            held.remove(key);
                            owners.remove(key);
                            return idOnly(Type.RELEASED, f.id);
                        }
                        return idOnly(Type.NOT_HELD, f.id);
                    }
                    case Type.RELEASE_OWNER -> {
                        long[] h = held.get(key);
                        if (h != null && java.util.Arrays.equals(owners.get(key), f.owner)) {
                            held.remove(key);
                            owners.remove(key);
                            return idOnly(Type.RELEASED, f.id);
                        }
                        return idOnly(Type.NOT_HELD, f.id);
                    }
                    case Type.DESCRIBE -> {
                        Frame i = new Frame(Type.INFO);
                        i.id = f.id;
                        long[] h = held.get(key);
                        if (h != null) {
                            i.flags = 1;
                            i.token = h[0];
                            i.owner = owners.get(key).clone();
                            i.remainingMs = 1000;
                            i.leaseMs = 1000;
                        }
                        return i;
                    }
                    default -> {
                        return null; // C: nothing of its own
                    }
                }
            } finally {
                mu.unlock();
            }
        }

        boolean isHeld(String key) {
            mu.lock();
            try {
                return held.containsKey(key);
            } finally {
                mu.unlock();
            }
        }
    }
}
