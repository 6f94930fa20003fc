package io.ticketing;

import java.io.IOException;
import java.io.InputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;

/**
 * The socket's input with the connection's silence bound: every read that
 * brings bytes is a sign of life, and a read gives up (SocketTimeoutException)
 * only once the server has been silent longer than the bound that applies
 * now, which may change while the read waits (a request makes an idle
 * connection busy). No single wait is longer than the busy bound, so that
 * the change is seen in time; a wait that ends without a byte consumed
 * nothing, so the read simply waits again.
 */
final class LiveInput extends InputStream {
    /** What decides the bound; set once the hello is answered. */
    interface Bound {
        /** Nanos (System.nanoTime) after which the server is silent too long, given its last byte at lastByte. */
        long deadlineNanos(long lastByte);

        /** The busy bound in ms: the longest single wait. */
        long busyMs();
    }

    private final Socket sock;
    private final InputStream raw;
    private volatile Bound bound;
    private volatile long lastByte = System.nanoTime();
    /** The bound, in ms, of the read that gave up: for the failure's words. */
    volatile long quietMs;

    LiveInput(Socket sock) throws IOException {
        this.sock = sock;
        this.raw = sock.getInputStream();
    }

    void bound(Bound b) {
        lastByte = System.nanoTime();
        bound = b;
    }

    @Override
    public int read() throws IOException {
        byte[] one = new byte[1];
        int n = read(one, 0, 1);
        return n < 0 ? -1 : one[0] & 0xff;
    }

    @Override
    public int read(byte[] b, int off, int len) throws IOException {
        Bound bd = bound;
        if (bd == null) {
            return raw.read(b, off, len); // the hello: the socket's own timeout applies
        }
        while (true) {
            long last = lastByte;
            long left = bd.deadlineNanos(last) - System.nanoTime();
            if (left <= 0) {
                quietMs = (System.nanoTime() - last) / 1_000_000;
                throw new SocketTimeoutException("nothing received from the server for " + quietMs + " ms");
            }
            sock.setSoTimeout((int) Math.max(1, Math.min(left / 1_000_000 + 1, bd.busyMs())));
            try {
                int n = raw.read(b, off, len);
                if (n > 0) {
                    lastByte = System.nanoTime();
                }
                return n;
            } catch (SocketTimeoutException e) {
                // nothing consumed: look at the bound again
            }
        }
    }

    @Override
    public int available() throws IOException {
        return raw.available();
    }

    @Override
    public void close() throws IOException {
        raw.close();
    }
}
