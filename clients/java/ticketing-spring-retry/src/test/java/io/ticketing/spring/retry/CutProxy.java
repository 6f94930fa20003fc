package io.ticketing.spring.retry;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A TCP proxy in front of PostgreSQL that can cut a connection right after a
 * COMMIT: armed, it forwards the client's COMMIT to the server, waits for the
 * server's answer and then closes both sides instead of forwarding it. The
 * transaction is committed, but the client cannot know: the fault a real
 * network can cause, which a real database cannot be told to produce.
 */
final class CutProxy implements AutoCloseable {
    private final ServerSocket ss;
    private final int target;
    private final AtomicBoolean armed = new AtomicBoolean();
    final AtomicBoolean cut = new AtomicBoolean();

    CutProxy(int targetPort) throws IOException {
        this.target = targetPort;
        this.ss = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        daemon(this::accept);
    }

    private static void daemon(Runnable r) {
        Thread t = new Thread(r, "cut-proxy");
        t.setDaemon(true);
        t.start();
    }

    int port() {
        return ss.getLocalPort();
    }

    /** Cuts the next connection that sends a COMMIT, after the server answered it. */
    void arm() {
        cut.set(false);
        armed.set(true);
    }

    private void accept() {
        while (!ss.isClosed()) {
            try {
                Socket c = ss.accept();
                Socket s = new Socket(InetAddress.getLoopbackAddress(), target);
                AtomicBoolean cutAfterAnswer = new AtomicBoolean();
                daemon(() -> pump(c, s, true, cutAfterAnswer));
                daemon(() -> pump(s, c, false, cutAfterAnswer));
            } catch (IOException e) {
                return;
            }
        }
    }

    private void pump(Socket from, Socket to, boolean clientToServer, AtomicBoolean cutAfterAnswer) {
        byte[] buf = new byte[64 * 1024];
        try {
            InputStream in = from.getInputStream();
            OutputStream out = to.getOutputStream();
            int n;
            while ((n = in.read(buf)) > 0) {
                if (clientToServer) {
                    if (armed.get() && new String(buf, 0, n, StandardCharsets.ISO_8859_1).contains("COMMIT") && armed.compareAndSet(true, false)) {
                        cutAfterAnswer.set(true);
                    }
                } else if (cutAfterAnswer.get()) {
                    cut.set(true);
                    break; // the answer to COMMIT is dropped
                }
                out.write(buf, 0, n);
                out.flush();
            }
        } catch (IOException ignored) {
            // the other side closed
        }
        close(from);
        close(to);
    }

    private static void close(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // best effort
        }
    }

    @Override
    public void close() throws IOException {
        ss.close();
    }
}
