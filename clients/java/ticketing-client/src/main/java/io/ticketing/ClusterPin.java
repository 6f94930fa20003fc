package io.ticketing;

import io.ticketing.wire.Frame;
import io.ticketing.wire.Type;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The cluster a broker serves: set from the builder, or by the first server
 * that reports a cluster ID in its hello answer, never changed afterwards.
 * A server of another cluster (a wiped server that founded a cluster of its
 * own, a cluster restored elsewhere) would grant keys the real cluster holds,
 * with tokens that start again from 1; it is refused.
 */
final class ClusterPin {
    private static final HexFormat HEX = HexFormat.of();
    private static final byte[] NONE = new byte[Type.CLUSTER_ID_LEN];

    private final boolean configured;
    private final ReentrantLock mu = new ReentrantLock(); // a lock that never pins a virtual thread
    private byte[] id; // null until pinned, under mu

    ClusterPin(String configured) {
        this.configured = configured != null;
        this.id = configured == null ? null : parse(configured);
    }

    /** Parses a cluster ID given by the application: 32 hex digits, not all zero. */
    static byte[] parse(String s) {
        byte[] b = null;
        try {
            b = HEX.parseHex(s.trim());
        } catch (IllegalArgumentException e) {
            // reported below
        }
        if (b == null || b.length != Type.CLUSTER_ID_LEN || Arrays.equals(b, NONE)) {
            throw new InvalidArgumentException("cluster ID \"" + s + "\" is not a cluster ID: it is " + 2 * Type.CLUSTER_ID_LEN
                    + " hex digits, not all zero, as ticketctl status prints it (cluster_id)");
        }
        return b;
    }

    static String format(byte[] id) {
        return Arrays.equals(id, NONE) ? "none" : HEX.formatHex(id);
    }

    /** The pinned ID in hex, or null while none is pinned. */
    String get() {
        mu.lock();
        try {
            return id == null ? null : format(id);
        } finally {
            mu.unlock();
        }
    }

    /**
     * Admits or refuses the server at addr by its hello answer: null to admit,
     * else the refusal. The first ID reported is pinned; a server reporting no
     * ID yet is admitted without pinning while nothing is pinned (a serving
     * leader always has its ID) and refused once an ID is pinned; a server
     * that reports none at all (older than cluster IDs) is admitted unchecked,
     * so that clients keep working through a rolling upgrade.
     */
    WrongClusterException check(String addr, Frame ready) {
        if ((ready.flags & Type.READY_CLUSTER_ID) == 0) {
            return null;
        }
        boolean none = Arrays.equals(ready.clusterId, NONE);
        String pinned;
        mu.lock();
        try {
            if (id == null) {
                if (!none) {
                    id = ready.clusterId.clone();
                }
                return null;
            }
            if (Arrays.equals(id, ready.clusterId)) {
                return null;
            }
            pinned = format(id);
        } finally {
            mu.unlock();
        }
        String server = format(ready.clusterId);
        String node = new String(ready.text, java.nio.charset.StandardCharsets.UTF_8);
        String what = none ? "has no cluster ID yet (cluster none: still forming)" : "belongs to cluster " + server;
        return new WrongClusterException("the server " + addr + " (node " + node + ") " + what + ", and this client is pinned to cluster "
                + pinned + (configured ? " (set by the builder's clusterId)" : " (pinned at the first server it reached)")
                + ": it does not use that server. If the cluster was restored from a snapshot, it has a new ID: give the clients "
                + "the new one (clusterId) or restart them; otherwise remove the address from the client's list", pinned, server);
    }
}
