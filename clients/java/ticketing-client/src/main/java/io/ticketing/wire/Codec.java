package io.ticketing.wire;

import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;

/**
 * Encoder and decoder of protocol version 1 frames, byte for byte as
 * docs/protocol.md and testdata/vectors.json give them. All integers are
 * big-endian; every variable-length field is the last of its frame.
 */
public final class Codec {
    private Codec() {}

    /**
     * The whole frame, length prefix included. The caller keeps fields in
     * range (key and text lengths fit u16, values fit their widths); the
     * protocol's argument ranges (lease 1..250 and so on) are not checked
     * here, so that tests can send invalid requests on purpose.
     */
    public static byte[] encode(Frame f) {
        int size = 1 + payloadSize(f);
        ByteBuffer b = ByteBuffer.allocate(4 + size);
        b.putInt(size);
        b.put(f.type);
        switch (f.type) {
            case Type.HELLO -> {
                b.putShort((short) f.version);
                b.put((byte) f.flags);
                putStr(b, f.text);
            }
            case Type.ACQUIRE -> {
                b.putInt((int) f.id);
                b.put(f.owner, 0, 16);
                b.put((byte) f.waitSec);
                b.put((byte) f.leaseSec);
                putStr(b, f.key);
            }
            case Type.CANCEL -> {
                b.putInt((int) f.id);
                b.put(f.owner, 0, 16);
            }
            case Type.RELEASE -> {
                b.putInt((int) f.id);
                b.putLong(f.token);
                putStr(b, f.key);
            }
            case Type.DESCRIBE -> {
                b.putInt((int) f.id);
                putStr(b, f.key);
            }
            case Type.RELEASE_OWNER -> {
                b.putInt((int) f.id);
                b.put(f.owner, 0, 16);
                putStr(b, f.key);
            }
            case Type.ADMIN -> {
                b.putInt((int) f.id);
                b.put(f.text);
            }
            case Type.READY -> {
                b.putShort((short) f.version);
                b.put((byte) f.flags);
                b.putInt((int) f.intervalMs);
                b.putInt((int) f.count);
                putStr(b, f.text);
                if ((f.flags & Type.READY_CLUSTER_ID) != 0) {
                    b.put(f.clusterId, 0, Type.CLUSTER_ID_LEN);
                }
                if ((f.flags & Type.READY_IDLE_PINGS) != 0) {
                    b.putInt((int) f.idleIntervalMs);
                }
            }
            case Type.GRANTED -> {
                b.putInt((int) f.id);
                b.putLong(f.token);
                b.putInt((int) f.leaseMs);
                b.putInt((int) f.queuedMs);
            }
            case Type.NOT_ACQUIRED -> {
                b.putInt((int) f.id);
                b.putInt((int) f.queuedMs);
            }
            case Type.QUEUED -> {
                b.putInt((int) f.id);
                b.putInt((int) f.count);
            }
            case Type.CANCELLED, Type.RELEASED, Type.NOT_HELD -> b.putInt((int) f.id);
            case Type.CAPACITY, Type.FORBIDDEN -> {
                b.putInt((int) f.id);
                b.put((byte) f.reason);
            }
            case Type.NOT_LEADER -> putStr(b, f.text);
            case Type.ERROR -> {
                b.putShort((short) f.code);
                putStr(b, f.text);
            }
            case Type.INFO -> {
                b.putInt((int) f.id);
                b.put((byte) f.flags);
                b.putLong(f.token);
                b.put(f.owner, 0, 16);
                b.putInt((int) f.remainingMs);
                b.putInt((int) f.leaseMs);
                b.putInt((int) f.count);
            }
            case Type.ADMIN_REPLY -> {
                b.putInt((int) f.id);
                b.putShort((short) f.code);
                b.put(f.text);
            }
            case Type.PING, Type.PONG -> b.putLong(f.nonce);
            case Type.COORD -> {
                b.putInt((int) f.id);
                b.put((byte) f.op);
                b.put(f.text);
            }
            case Type.COORD_REPLY -> {
                b.putInt((int) f.id);
                b.put((byte) f.op);
                b.putShort((short) f.code);
                b.put(f.text);
            }
            default -> throw new IllegalArgumentException("cannot encode unknown frame type " + Type.name(f.type));
        }
        return b.array();
    }

    private static int payloadSize(Frame f) {
        return switch (f.type) {
            case Type.HELLO -> 5 + f.text.length;
            case Type.ACQUIRE -> 24 + f.key.length;
            case Type.CANCEL -> 20;
            case Type.RELEASE -> 14 + f.key.length;
            case Type.DESCRIBE -> 6 + f.key.length;
            case Type.RELEASE_OWNER -> 22 + f.key.length;
            case Type.ADMIN -> 4 + f.text.length;
            case Type.READY -> 13 + f.text.length + ((f.flags & Type.READY_CLUSTER_ID) != 0 ? Type.CLUSTER_ID_LEN : 0)
                    + ((f.flags & Type.READY_IDLE_PINGS) != 0 ? 4 : 0);
            case Type.GRANTED -> 20;
            case Type.NOT_ACQUIRED, Type.QUEUED, Type.PING, Type.PONG -> 8;
            case Type.CANCELLED, Type.RELEASED, Type.NOT_HELD -> 4;
            case Type.CAPACITY, Type.FORBIDDEN -> 5;
            case Type.NOT_LEADER -> 2 + f.text.length;
            case Type.ERROR -> 4 + f.text.length;
            case Type.INFO -> 41;
            case Type.ADMIN_REPLY -> 6 + f.text.length;
            case Type.COORD -> 5 + f.text.length;
            case Type.COORD_REPLY -> 7 + f.text.length;
            default -> throw new IllegalArgumentException("cannot encode unknown frame type " + Type.name(f.type));
        };
    }

    private static void putStr(ByteBuffer b, byte[] s) {
        if (s.length > 0xffff) {
            throw new IllegalArgumentException("a str field of " + s.length + " bytes does not fit its u16 length");
        }
        b.putShort((short) s.length);
        b.put(s);
    }

    /**
     * Decodes one frame body: the type byte and its payload, without the
     * length prefix. The payload must have exactly its layout's size.
     */
    public static Frame decode(byte[] body) throws WireException {
        if (body.length == 0) {
            throw new WireException(ErrorCode.MALFORMED_FRAME, "frame of length 0 (it must at least hold the type byte)");
        }
        ByteBuffer b = ByteBuffer.wrap(body);
        Frame f = new Frame(b.get());
        try {
            switch (f.type) {
                case Type.HELLO -> {
                    f.version = u16(b);
                    f.flags = u8(b);
                    f.text = str(b);
                }
                case Type.ACQUIRE -> {
                    f.id = u32(b);
                    b.get(f.owner);
                    f.waitSec = u8(b);
                    f.leaseSec = u8(b);
                    f.key = str(b);
                }
                case Type.CANCEL -> {
                    f.id = u32(b);
                    b.get(f.owner);
                }
                case Type.RELEASE -> {
                    f.id = u32(b);
                    f.token = b.getLong();
                    f.key = str(b);
                }
                case Type.DESCRIBE -> {
                    f.id = u32(b);
                    f.key = str(b);
                }
                case Type.RELEASE_OWNER -> {
                    f.id = u32(b);
                    b.get(f.owner);
                    f.key = str(b);
                }
                case Type.ADMIN -> {
                    f.id = u32(b);
                    f.text = rest(b);
                }
                case Type.READY -> {
                    f.version = u16(b);
                    f.flags = u8(b);
                    f.intervalMs = u32(b);
                    f.count = u32(b);
                    f.text = str(b);
                    if ((f.flags & Type.READY_CLUSTER_ID) != 0) {
                        b.get(f.clusterId);
                    }
                    if ((f.flags & Type.READY_IDLE_PINGS) != 0) {
                        f.idleIntervalMs = u32(b);
                    }
                }
                case Type.GRANTED -> {
                    f.id = u32(b);
                    f.token = b.getLong();
                    f.leaseMs = u32(b);
                    f.queuedMs = u32(b);
                }
                case Type.NOT_ACQUIRED -> {
                    f.id = u32(b);
                    f.queuedMs = u32(b);
                }
                case Type.QUEUED -> {
                    f.id = u32(b);
                    f.count = u32(b);
                }
                case Type.CANCELLED, Type.RELEASED, Type.NOT_HELD -> f.id = u32(b);
                case Type.CAPACITY, Type.FORBIDDEN -> {
                    f.id = u32(b);
                    f.reason = u8(b);
                }
                case Type.NOT_LEADER -> f.text = str(b);
                case Type.ERROR -> {
                    f.code = u16(b);
                    f.text = str(b);
                }
                case Type.INFO -> {
                    f.id = u32(b);
                    f.flags = u8(b);
                    f.token = b.getLong();
                    b.get(f.owner);
                    f.remainingMs = u32(b);
                    f.leaseMs = u32(b);
                    f.count = u32(b);
                }
                case Type.ADMIN_REPLY -> {
                    f.id = u32(b);
                    f.code = u16(b);
                    f.text = rest(b);
                }
                case Type.PING, Type.PONG -> f.nonce = b.getLong();
                case Type.COORD -> {
                    f.id = u32(b);
                    f.op = u8(b);
                    f.text = rest(b);
                }
                case Type.COORD_REPLY -> {
                    f.id = u32(b);
                    f.op = u8(b);
                    f.code = u16(b);
                    f.text = rest(b);
                }
                default -> throw new WireException(ErrorCode.UNKNOWN_FRAME, "unknown frame type " + Type.name(f.type));
            }
        } catch (BufferUnderflowException e) {
            throw new WireException(ErrorCode.MALFORMED_FRAME,
                    "malformed " + Type.name(f.type) + " frame: " + body.length + " bytes are too few for its layout");
        }
        if (b.hasRemaining()) {
            throw new WireException(ErrorCode.MALFORMED_FRAME,
                    "malformed " + Type.name(f.type) + " frame: " + b.remaining() + " trailing bytes after its layout");
        }
        return f;
    }

    /**
     * Reads one whole frame from {@code in}. A length prefix over
     * {@link Type#MAX_FRAME} is refused (code 2) without reading the payload.
     *
     * @throws EOFException when the stream ends, at a frame boundary or inside a frame
     */
    public static Frame read(InputStream in) throws IOException, WireException {
        return read(in, false);
    }

    /**
     * {@link #read(InputStream)} that, with {@code coordFrames}, also accepts
     * K and T frames up to {@link Type#MAX_COORD_FRAME}: the type byte after
     * a longer length prefix is read, and any other type refused (code 2).
     */
    public static Frame read(InputStream in, boolean coordFrames) throws IOException, WireException {
        return read(in, () -> coordFrames);
    }

    /**
     * {@link #read(InputStream, boolean)} with the allowance asked after the
     * length prefix was read (it may be given while the read waits).
     */
    public static Frame read(InputStream in, java.util.function.BooleanSupplier coordAllowed) throws IOException, WireException {
        byte[] len = in.readNBytes(4);
        if (len.length < 4) {
            throw new EOFException(len.length == 0 ? "end of stream" : "end of stream inside a length prefix");
        }
        long n = ByteBuffer.wrap(len).getInt() & 0xffffffffL;
        byte[] body;
        if (n > Type.MAX_FRAME) {
            boolean coordFrames = coordAllowed.getAsBoolean();
            if (!coordFrames || n > Type.MAX_COORD_FRAME) {
                throw new WireException(ErrorCode.FRAME_TOO_LARGE,
                        "frame of " + n + " bytes exceeds the maximum of " + (coordFrames ? Type.MAX_COORD_FRAME : Type.MAX_FRAME));
            }
            int t = in.read();
            if (t < 0) {
                throw new EOFException("end of stream inside a frame of " + n + " bytes");
            }
            if (t != Type.COORD && t != Type.COORD_REPLY) {
                throw new WireException(ErrorCode.FRAME_TOO_LARGE,
                        Type.name((byte) t) + " frame of " + n + " bytes exceeds the maximum of " + Type.MAX_FRAME);
            }
            body = new byte[(int) n];
            body[0] = (byte) t;
            int got = in.readNBytes(body, 1, (int) n - 1);
            if (got < n - 1) {
                throw new EOFException("end of stream inside a frame of " + n + " bytes");
            }
            return decode(body);
        }
        if (n == 0) {
            throw new WireException(ErrorCode.MALFORMED_FRAME, "frame of length 0 (it must at least hold the type byte)");
        }
        body = in.readNBytes((int) n);
        if (body.length < n) {
            throw new EOFException("end of stream inside a frame of " + n + " bytes");
        }
        return decode(body);
    }

    /**
     * What a server checks beyond the layout ({@code wire.Validate}): lease
     * 1..250 s, key 1..1024 bytes, hello token at most 1024 bytes, and a K
     * or T body that matches its sub-op's layout ({@link Coord#decode}). Returns a
     * message saying what is out of range, or {@code null} when the frame is
     * valid; a server answers an invalid request with {@code E} code 8.
     */
    public static String validate(Frame f) {
        switch (f.type) {
            case Type.HELLO -> {
                if (f.text.length > Type.MAX_TOKEN) {
                    return "hello token of " + f.text.length + " bytes exceeds " + Type.MAX_TOKEN;
                }
            }
            case Type.ACQUIRE -> {
                if (f.leaseSec < Type.MIN_LEASE || f.leaseSec > Type.MAX_LEASE) {
                    return "lease " + f.leaseSec + " s is outside " + Type.MIN_LEASE + ".." + Type.MAX_LEASE + " s";
                }
                return validKey(f.key);
            }
            case Type.RELEASE, Type.RELEASE_OWNER, Type.DESCRIBE -> {
                return validKey(f.key);
            }
            case Type.COORD, Type.COORD_REPLY -> {
                try {
                    Coord.decode(f.type == Type.COORD_REPLY, f.op, f.code, f.text);
                } catch (WireException e) {
                    return e.getMessage();
                }
            }
            default -> {
            }
        }
        return null;
    }

    private static String validKey(byte[] key) {
        if (key.length < 1 || key.length > Type.MAX_KEY) {
            return "key of " + key.length + " bytes is outside 1.." + Type.MAX_KEY + " bytes";
        }
        return null;
    }

    private static int u8(ByteBuffer b) {
        return b.get() & 0xff;
    }

    private static int u16(ByteBuffer b) {
        return b.getShort() & 0xffff;
    }

    private static long u32(ByteBuffer b) {
        return b.getInt() & 0xffffffffL;
    }

    private static byte[] str(ByteBuffer b) {
        int n = u16(b);
        if (n > b.remaining()) {
            throw new BufferUnderflowException();
        }
        byte[] s = new byte[n];
        b.get(s);
        return s;
    }

    private static byte[] rest(ByteBuffer b) {
        byte[] s = new byte[b.remaining()];
        b.get(s);
        return s;
    }
}
