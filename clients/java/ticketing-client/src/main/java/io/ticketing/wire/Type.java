package io.ticketing.wire;

/** The frame type bytes of protocol version 1 (docs/protocol.md). */
public final class Type {
    private Type() {}

    public static final byte HELLO = 'H';
    public static final byte ACQUIRE = 'A';
    public static final byte CANCEL = 'C';
    public static final byte RELEASE = 'L';
    /** Release by owner: ends the hold (or queued acquire) of an owner on a key. */
    public static final byte RELEASE_OWNER = 'U';
    public static final byte DESCRIBE = 'D';
    public static final byte ADMIN = 'J';
    public static final byte READY = 'Y';
    public static final byte GRANTED = 'G';
    public static final byte NOT_ACQUIRED = 'W';
    public static final byte QUEUED = 'Q';
    public static final byte CANCELLED = 'X';
    public static final byte CAPACITY = 'B';
    public static final byte RELEASED = 'R';
    public static final byte NOT_HELD = 'N';
    public static final byte NOT_LEADER = 'M';
    public static final byte ERROR = 'E';
    public static final byte INFO = 'I';
    public static final byte ADMIN_REPLY = 'V';
    /** Forbidden: the principal may not make the request (final; the connection stays open). */
    public static final byte FORBIDDEN = 'F';
    public static final byte PING = 'P';
    public static final byte PONG = 'O';
    /** Coordination request: {@code id op body} (sub-ops in {@link Coord}). */
    public static final byte COORD = 'K';
    /** Coordination answer or notification: {@code id op status body}. */
    public static final byte COORD_REPLY = 'T';

    /** Protocol version spoken by this codec. */
    public static final int VERSION = 1;
    /** Largest allowed value of a frame's length prefix. */
    public static final int MAX_FRAME = 65536;
    /** Largest length prefix of a K or T frame: 1 MiB of data and 8 KiB for the rest. */
    public static final int MAX_COORD_FRAME = (1 << 20) + (8 << 10);
    /** Hello flag: administrative session. */
    public static final int HELLO_ADMIN = 1;
    /** Hello flag: the client reads the server's cluster ID in Y. */
    public static final int HELLO_CLUSTER_ID = 2;
    /** Hello flag: the client follows an idle ping interval (3 idle intervals of silence while idle). */
    public static final int HELLO_IDLE_PINGS = 4;
    /** Ready flag: the server is the leader. */
    public static final int READY_LEADER = 1;
    /** Ready flag: the server carries many coordination sessions on one connection (coordination requests then name their session). */
    public static final int READY_SESSIONS = 2;
    /** Ready flag: Y ends with the server's cluster ID (all zero: none yet). */
    public static final int READY_CLUSTER_ID = 4;
    /** Ready flag: Y ends with the idle ping interval (u32 ms). */
    public static final int READY_IDLE_PINGS = 8;
    /** Size of a cluster ID in Y. */
    public static final int CLUSTER_ID_LEN = 16;
    /** Info flag: the key is held. */
    public static final int INFO_HELD = 1;
    public static final int MAX_KEY = 1024;
    public static final int MAX_TOKEN = 1024;
    public static final int MAX_WAIT = 255;
    public static final int MIN_LEASE = 1;
    public static final int MAX_LEASE = 250;

    /** The letter of a type byte, or its hex value when it is not printable. */
    public static String name(byte t) {
        return t >= 0x21 && t < 0x7f ? String.valueOf((char) t) : String.format("0x%02x", t & 0xff);
    }
}
