package io.ticketing.wire;

import java.io.ByteArrayOutputStream;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * The body of a coordination frame ({@code K} request, {@code T} answer or
 * notification; docs/protocol.md, "Coordination frames"), encoded and
 * decoded by its sub-op's layout. One table ({@link #layout}) drives both,
 * with the field names of docs/protocol.md. Only the fields of the sub-op's
 * layout are meaningful; u64 fields hold their two's-complement bit pattern.
 */
public final class Coord {
    // Sub-ops of K (requests) and of T (their answers, same number).
    public static final int CREATE_NODE = 1;
    public static final int ALTER_NODE = 2;
    public static final int DROP_NODE = 3;
    public static final int DESCRIBE_NODE = 4;
    public static final int ATTACH = 5;
    public static final int STOP = 6;
    public static final int CREATE_SEMAPHORE = 7;
    public static final int UPDATE_SEMAPHORE = 8;
    public static final int DELETE_SEMAPHORE = 9;
    public static final int ACQUIRE = 10;
    public static final int RELEASE = 11;
    public static final int DESCRIBE_SEMAPHORE = 12;
    public static final int LIST_SESSIONS = 13;
    /** Set in the sub-op of a session request on a connection of several sessions: the body names the session. */
    public static final int FOR_SESSION = 0x80;
    // Notifications (T only).
    public static final int QUEUED = 64;
    public static final int CHANGED = 65;
    public static final int LOST = 66;
    public static final int SESSION_ENDED = 67;

    // Statuses of T.
    public static final int SUCCESS = 0;
    public static final int NOT_FOUND = 1;
    public static final int ALREADY_EXISTS = 2;
    public static final int BAD_REQUEST = 3;
    public static final int PRECONDITION_FAILED = 4;
    public static final int ABORTED = 5;
    public static final int SESSION_EXPIRED = 6;
    public static final int BAD_SESSION = 7;
    public static final int UNAUTHORIZED = 8;
    public static final int LIMIT_EXCEEDED = 9;

    // Flag bits, by sub-op.
    public static final int FLAG_FORCE = 1; // K delete semaphore
    public static final int FLAG_EPHEMERAL = 1; // K acquire; T describe semaphore
    public static final int FLAG_ACQUIRED = 1; // T acquire
    public static final int FLAG_RELEASED = 1; // T release
    public static final int FLAG_OWNERS = 1; // K describe semaphore
    public static final int FLAG_WAITERS = 2;
    public static final int FLAG_WATCH_DATA = 4;
    public static final int FLAG_WATCH_OWNERS = 8;
    public static final int FLAG_NO_DATA = 16;
    public static final int FLAG_MORE_HOLDERS = 2; // T describe semaphore
    public static final int FLAG_MORE = 1; // T list sessions
    public static final int FLAG_ATTACHED = 1; // a session of a T list sessions: attached now

    /** Acquire count asking for the whole limit; acquire timeout waiting forever. */
    public static final long EXCLUSIVE = -1L;
    public static final long WAIT_FOREVER = -1L;

    // Sizes of fields (docs/coordination.md, Limits), checked before sending.
    public static final int MAX_DATA = 1 << 20;
    public static final int MAX_PATH = 1024;
    public static final int MAX_NAME = 1024;
    public static final int MAX_DESC = 1024;
    public static final int MAX_KEY = 16;

    public byte[] path = new byte[0];
    public byte[] name = new byte[0];
    public byte[] key = new byte[0];
    public byte[] desc = new byte[0];
    public byte[] data = new byte[0];
    public byte[] message = new byte[0];
    public long session;
    public long seqNo;
    public long timeoutMs;
    public long limit;
    public long count;
    public long orderId;
    public long after;
    public long version;
    public long selfCheckMs;
    public long graceMs;
    public long maxSessions;
    public long maxSemaphores;
    public long maxWaiters;
    public long sessions;
    public long semaphores;
    public long waiters;
    public int readMode;
    public int attachMode;
    public int flags;
    public int reason;
    public List<Holder> owners = new ArrayList<>();
    public List<Holder> queue = new ArrayList<>();
    public List<SessionEntry> list = new ArrayList<>();

    /** An owner or waiter of a semaphore. */
    public record Holder(long orderId, long session, long count, long timeoutMs, byte[] data) {}

    /** A session of a list-sessions answer. */
    public record SessionEntry(long session, long seqNo, long timeoutMs, int flags, byte[] desc) {}

    private static final String[] NODE_CONFIG = {"self_check_ms", "grace_ms", "read_mode", "attach_mode", "max_sessions", "max_semaphores", "max_waiters"};

    /**
     * The body layout of a sub-op: field names in order; {@code null} for a
     * sub-op that does not exist in this direction. A T with a status other
     * than SUCCESS has the body {@code message}.
     */
    static String[] layout(boolean reply, int op, int status) {
        if (!reply && (op & FOR_SESSION) != 0) {
            int base = op & ~FOR_SESSION;
            String[] plain = layout(false, base, status);
            if (plain == null || base < ATTACH || base > DESCRIBE_SEMAPHORE) {
                return null;
            }
            if (base == ATTACH) {
                return plain;
            }
            String[] out = new String[plain.length + 1];
            out[0] = "session";
            System.arraycopy(plain, 0, out, 1, plain.length);
            return out;
        }
        if (reply && status != SUCCESS && op < QUEUED) {
            return op >= CREATE_NODE && op <= LIST_SESSIONS ? new String[] {"message"} : null;
        }
        if (!reply) {
            return switch (op) {
                case CREATE_NODE, ALTER_NODE -> concat(new String[] {"path"}, NODE_CONFIG);
                case DROP_NODE, DESCRIBE_NODE -> new String[] {"path"};
                case ATTACH -> new String[] {"path", "session", "seq_no", "timeout_ms", "key", "desc"};
                case STOP -> new String[] {};
                case CREATE_SEMAPHORE -> new String[] {"name", "limit", "data"};
                case UPDATE_SEMAPHORE -> new String[] {"name", "data"};
                case DELETE_SEMAPHORE -> new String[] {"name", "flags"};
                case ACQUIRE -> new String[] {"name", "count", "timeout_ms", "flags", "data"};
                case RELEASE -> new String[] {"name"};
                case DESCRIBE_SEMAPHORE -> new String[] {"name", "flags", "after"};
                case LIST_SESSIONS -> new String[] {"path", "after"};
                default -> null;
            };
        }
        return switch (op) {
            case CREATE_NODE, ALTER_NODE, DROP_NODE, STOP, CREATE_SEMAPHORE, UPDATE_SEMAPHORE, DELETE_SEMAPHORE -> new String[] {};
            case DESCRIBE_NODE -> concat(NODE_CONFIG, new String[] {"sessions", "semaphores", "waiters"});
            case ATTACH -> new String[] {"session", "seq_no"};
            case ACQUIRE -> new String[] {"flags", "order_id", "count"};
            case RELEASE -> new String[] {"flags"};
            case DESCRIBE_SEMAPHORE -> new String[] {"limit", "count", "flags", "data", "owners", "queue", "version"};
            case LIST_SESSIONS -> new String[] {"flags", "list"};
            case QUEUED -> new String[] {"order_id"};
            case CHANGED -> new String[] {"flags"};
            case LOST -> new String[] {"name", "order_id"};
            case SESSION_ENDED -> new String[] {"session", "reason"};
            default -> null;
        };
    }

    private static String[] concat(String[] a, String[] b) {
        String[] out = new String[a.length + b.length];
        System.arraycopy(a, 0, out, 0, a.length);
        System.arraycopy(b, 0, out, a.length, b.length);
        return out;
    }

    /** Whether a body of this direction, sub-op and status has a layout. */
    public static boolean known(boolean reply, int op, int status) {
        return layout(reply, op, status) != null;
    }

    /** The encoded body of a K (reply false) or T frame. An unknown sub-op encodes nothing. */
    public byte[] encode(boolean reply, int op, int status) {
        String[] fields = layout(reply, op, status);
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        if (fields == null) {
            return out.toByteArray();
        }
        ByteBuffer b8 = ByteBuffer.allocate(8);
        for (String fd : fields) {
            switch (fd) {
                case "path" -> str(out, path);
                case "name" -> str(out, name);
                case "key" -> str(out, key);
                case "desc" -> str(out, desc);
                case "message" -> str(out, message);
                case "data" -> data(out, data);
                case "session" -> u64(out, b8, session);
                case "seq_no" -> u64(out, b8, seqNo);
                case "timeout_ms" -> u64(out, b8, timeoutMs);
                case "limit" -> u64(out, b8, limit);
                case "count" -> u64(out, b8, count);
                case "order_id" -> u64(out, b8, orderId);
                case "after" -> u64(out, b8, after);
                case "version" -> u64(out, b8, version);
                case "self_check_ms" -> u32(out, selfCheckMs);
                case "grace_ms" -> u32(out, graceMs);
                case "max_sessions" -> u32(out, maxSessions);
                case "max_semaphores" -> u32(out, maxSemaphores);
                case "max_waiters" -> u32(out, maxWaiters);
                case "sessions" -> u32(out, sessions);
                case "semaphores" -> u32(out, semaphores);
                case "waiters" -> u32(out, waiters);
                case "read_mode" -> out.write(readMode);
                case "attach_mode" -> out.write(attachMode);
                case "flags" -> out.write(flags);
                case "reason" -> out.write(reason);
                case "owners", "queue" -> {
                    List<Holder> hs = fd.equals("owners") ? owners : queue;
                    u32(out, hs.size());
                    for (Holder h : hs) {
                        u64(out, b8, h.orderId());
                        u64(out, b8, h.session());
                        u64(out, b8, h.count());
                        u64(out, b8, h.timeoutMs());
                        data(out, h.data());
                    }
                }
                case "list" -> {
                    u32(out, list.size());
                    for (SessionEntry s : list) {
                        u64(out, b8, s.session());
                        u64(out, b8, s.seqNo());
                        u64(out, b8, s.timeoutMs());
                        out.write(s.flags());
                        str(out, s.desc());
                    }
                }
                default -> throw new IllegalStateException("coordination field " + fd + " has no encoding");
            }
        }
        return out.toByteArray();
    }

    /**
     * Decodes the body of a K (reply false) or T frame.
     *
     * @throws WireException code 3 for an unknown sub-op, 1 for a body that
     *     does not match its layout
     */
    public static Coord decode(boolean reply, int op, int status, byte[] body) throws WireException {
        String[] fields = layout(reply, op, status);
        String what = (reply ? "T" : "K") + " sub-op " + op;
        if (fields == null) {
            throw new WireException(ErrorCode.UNKNOWN_FRAME, "unknown coordination sub-op " + op + " in " + (reply ? "T" : "K"));
        }
        Coord c = new Coord();
        ByteBuffer b = ByteBuffer.wrap(body);
        try {
            for (String fd : fields) {
                switch (fd) {
                    case "path" -> c.path = str(b);
                    case "name" -> c.name = str(b);
                    case "key" -> c.key = str(b);
                    case "desc" -> c.desc = str(b);
                    case "message" -> c.message = str(b);
                    case "data" -> c.data = data(b);
                    case "session" -> c.session = b.getLong();
                    case "seq_no" -> c.seqNo = b.getLong();
                    case "timeout_ms" -> c.timeoutMs = b.getLong();
                    case "limit" -> c.limit = b.getLong();
                    case "count" -> c.count = b.getLong();
                    case "order_id" -> c.orderId = b.getLong();
                    case "after" -> c.after = b.getLong();
                    case "version" -> c.version = b.getLong();
                    case "self_check_ms" -> c.selfCheckMs = u32(b);
                    case "grace_ms" -> c.graceMs = u32(b);
                    case "max_sessions" -> c.maxSessions = u32(b);
                    case "max_semaphores" -> c.maxSemaphores = u32(b);
                    case "max_waiters" -> c.maxWaiters = u32(b);
                    case "sessions" -> c.sessions = u32(b);
                    case "semaphores" -> c.semaphores = u32(b);
                    case "waiters" -> c.waiters = u32(b);
                    case "read_mode" -> c.readMode = b.get() & 0xff;
                    case "attach_mode" -> c.attachMode = b.get() & 0xff;
                    case "flags" -> c.flags = b.get() & 0xff;
                    case "reason" -> c.reason = b.get() & 0xff;
                    case "owners", "queue" -> {
                        long n = u32(b);
                        if (n > b.remaining() / 36) { // each holder is at least 36 bytes
                            throw new BufferUnderflowException();
                        }
                        List<Holder> hs = new ArrayList<>();
                        for (long i = 0; i < n; i++) {
                            hs.add(new Holder(b.getLong(), b.getLong(), b.getLong(), b.getLong(), data(b)));
                        }
                        if (fd.equals("owners")) {
                            c.owners = hs;
                        } else {
                            c.queue = hs;
                        }
                    }
                    case "list" -> {
                        long n = u32(b);
                        if (n > b.remaining() / 27) { // each session is at least 27 bytes
                            throw new BufferUnderflowException();
                        }
                        for (long i = 0; i < n; i++) {
                            c.list.add(new SessionEntry(b.getLong(), b.getLong(), b.getLong(), b.get() & 0xff, str(b)));
                        }
                    }
                    default -> throw new IllegalStateException("coordination field " + fd + " has no decoding");
                }
            }
        } catch (BufferUnderflowException e) {
            throw new WireException(ErrorCode.MALFORMED_FRAME, what + " body is shorter than its layout");
        }
        if (b.hasRemaining()) {
            throw new WireException(ErrorCode.MALFORMED_FRAME, what + " body has " + b.remaining() + " trailing bytes");
        }
        int mask = flagMask(reply, op, status);
        if (mask >= 0 && (c.flags & ~mask) != 0) {
            throw new WireException(ErrorCode.MALFORMED_FRAME, what + " sets undefined flag bits " + (c.flags & ~mask));
        }
        for (SessionEntry e : c.list) {
            if ((e.flags() & ~1) != 0) {
                throw new WireException(ErrorCode.MALFORMED_FRAME, what + ": a listed session sets undefined flag bits " + (e.flags() & ~1));
            }
        }
        return c;
    }

    /** The defined flag bits of a body with flags; -1 for a body without. */
    private static int flagMask(boolean reply, int op, int status) {
        if (reply && status != SUCCESS) {
            return -1;
        }
        if (!reply) {
            op &= ~FOR_SESSION;
            return switch (op) {
                case DELETE_SEMAPHORE -> FLAG_FORCE;
                case ACQUIRE -> FLAG_EPHEMERAL;
                case DESCRIBE_SEMAPHORE -> FLAG_OWNERS | FLAG_WAITERS | FLAG_WATCH_DATA | FLAG_WATCH_OWNERS | FLAG_NO_DATA;
                default -> -1;
            };
        }
        return switch (op) {
            case ACQUIRE, RELEASE, LIST_SESSIONS -> 1;
            case DESCRIBE_SEMAPHORE -> FLAG_EPHEMERAL | FLAG_MORE_HOLDERS;
            case CHANGED -> 3;
            default -> -1;
        };
    }

    private static void str(ByteArrayOutputStream out, byte[] s) {
        out.write(s.length >>> 8);
        out.write(s.length);
        out.writeBytes(s);
    }

    private static void data(ByteArrayOutputStream out, byte[] s) {
        u32(out, s.length);
        out.writeBytes(s);
    }

    private static void u32(ByteArrayOutputStream out, long v) {
        out.write((int) (v >>> 24));
        out.write((int) (v >>> 16));
        out.write((int) (v >>> 8));
        out.write((int) v);
    }

    private static void u64(ByteArrayOutputStream out, ByteBuffer b8, long v) {
        b8.clear();
        b8.putLong(v);
        out.writeBytes(b8.array());
    }

    private static long u32(ByteBuffer b) {
        return b.getInt() & 0xffffffffL;
    }

    private static byte[] str(ByteBuffer b) {
        int n = b.getShort() & 0xffff;
        if (n > b.remaining()) {
            throw new BufferUnderflowException();
        }
        byte[] s = new byte[n];
        b.get(s);
        return s;
    }

    private static byte[] data(ByteBuffer b) {
        long n = u32(b);
        if (n > b.remaining()) {
            throw new BufferUnderflowException();
        }
        byte[] s = new byte[(int) n];
        b.get(s);
        return s;
    }
}
