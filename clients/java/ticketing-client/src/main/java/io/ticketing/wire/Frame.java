package io.ticketing.wire;

import java.util.Arrays;
import java.util.HexFormat;

/**
 * One protocol frame (docs/protocol.md). A plain mutable holder: only the
 * fields of {@link #type}'s layout are meaningful, the others stay zero.
 * u32 fields are held in {@code long} and u64 fields ({@code token},
 * {@code nonce}) in {@code long} as their two's-complement bit pattern (use
 * {@link Long#toUnsignedString(long)} to print them).
 */
public final class Frame {
    /** The type byte, an ASCII letter (see {@link Type}). */
    public byte type;
    /** H, Y: protocol version. */
    public int version;
    /** H, Y, I: flags byte. */
    public int flags;
    /** Request id (u32) of requests and of their answers. */
    public long id;
    /** A, C, I (and U): 16 owner bytes. */
    public byte[] owner = new byte[16];
    /** A: wait in seconds (u8). */
    public int waitSec;
    /** A: lease in seconds (u8). */
    public int leaseSec;
    /** A, L, D (and U): the key bytes. */
    public byte[] key = new byte[0];
    /** L, G, I: fencing token (u64 bit pattern). */
    public long token;
    /** G, I: lease in ms (u32). */
    public long leaseMs;
    /** G, W: queued time in ms (u32). */
    public long queuedMs;
    /** Y: in-flight limit; Q: queue position; I: waiters (u32). */
    public long count;
    /** B: capacity reason; F: refusal reason (u8). */
    public int reason;
    /** E: error code; V: admin status (u16). */
    public int code;
    /** Y: ping interval in ms (u32). */
    public long intervalMs;
    /** P, O: nonce (u64 bit pattern). */
    public long nonce;
    /** I: remaining lease in ms (u32). */
    public long remainingMs;
    /** K, T: the coordination sub-op (u8); T's status is {@link #code}. */
    public int op;
    /** H, Y, M, E: str text; J, V: text to the end of the frame; K, T: the sub-op's body (see {@link Coord}). */
    public byte[] text = new byte[0];
    /** Y with {@link Type#READY_CLUSTER_ID}: the server's cluster ID (all zero: none yet). */
    public byte[] clusterId = new byte[Type.CLUSTER_ID_LEN];
    /** Y with {@link Type#READY_IDLE_PINGS}: the ping interval in ms while the connection is idle (u32). */
    public long idleIntervalMs;

    public Frame() {}

    public Frame(byte type) {
        this.type = type;
    }

    @Override
    public boolean equals(Object o) {
        if (!(o instanceof Frame f)) {
            return false;
        }
        return type == f.type && version == f.version && flags == f.flags && id == f.id
                && Arrays.equals(owner, f.owner) && waitSec == f.waitSec && leaseSec == f.leaseSec
                && Arrays.equals(key, f.key) && token == f.token && leaseMs == f.leaseMs
                && queuedMs == f.queuedMs && count == f.count && reason == f.reason && code == f.code
                && intervalMs == f.intervalMs && nonce == f.nonce && remainingMs == f.remainingMs && op == f.op
                && Arrays.equals(text, f.text) && Arrays.equals(clusterId, f.clusterId)
                && idleIntervalMs == f.idleIntervalMs;
    }

    @Override
    public int hashCode() {
        return Arrays.hashCode(new long[] {type, id, token, nonce}) ^ Arrays.hashCode(key);
    }

    @Override
    public String toString() {
        HexFormat h = HexFormat.of();
        return "Frame{" + (char) type + " id=" + id + " token=" + Long.toUnsignedString(token)
                + " owner=" + h.formatHex(owner) + " wait=" + waitSec + " lease=" + leaseSec
                + " key=" + h.formatHex(key) + " leaseMs=" + leaseMs + " queuedMs=" + queuedMs
                + " count=" + count + " reason=" + reason + " code=" + code + " intervalMs=" + intervalMs
                + " nonce=" + Long.toUnsignedString(nonce) + " remainingMs=" + remainingMs
                + " version=" + version + " flags=" + flags + " text=" + h.formatHex(text) + "}";
    }
}
