package io.ticketing.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.ticketing.Json;
import java.io.ByteArrayInputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The coordination body codec ({@link Coord}) against every vector of
 * testdata/coordination_vectors.json: each body decodes to exactly its
 * fields and encodes to exactly its bytes.
 */
class CoordVectorsTest {
    static final HexFormat HEX = HexFormat.of();

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> vectors() throws Exception {
        Path p = Path.of(System.getProperty("ticketing.repo.root", "../../.."), "testdata", "coordination_vectors.json");
        return (List<Map<String, Object>>) Json.parse(Files.readString(p));
    }

    @TestFactory
    Stream<DynamicTest> everyVector() throws Exception {
        List<DynamicTest> tests = new ArrayList<>();
        for (Map<String, Object> v : vectors()) {
            tests.add(DynamicTest.dynamicTest((String) v.get("name"), () -> check(v)));
        }
        return tests.stream();
    }

    @SuppressWarnings("unchecked")
    static void check(Map<String, Object> v) throws Exception {
        byte[] bytes = HEX.parseHex((String) v.get("hex"));
        Frame f = Codec.read(new ByteArrayInputStream(bytes));
        boolean reply = "T".equals(v.get("type"));
        assertEquals(reply ? Type.COORD_REPLY : Type.COORD, f.type);
        assertEquals(((Long) v.get("op")).intValue(), f.op);
        int status = v.containsKey("status") ? ((Long) v.get("status")).intValue() : 0;
        assertEquals(status, f.code);
        Coord got = Coord.decode(reply, f.op, f.code, f.text);
        Map<String, Object> body = (Map<String, Object>) v.get("body");
        Coord want = new Coord();
        for (Map.Entry<String, Object> e : body.entrySet()) {
            set(want, e.getKey(), e.getValue());
        }
        assertArrayEquals(f.text, want.encode(reply, f.op, f.code), "encode");
        assertArrayEquals(f.text, got.encode(reply, f.op, f.code), "decode, then encode");
        for (Map.Entry<String, Object> e : body.entrySet()) {
            Coord one = new Coord();
            set(one, e.getKey(), e.getValue());
            assertEquals(describe(one, e.getKey()), describe(got, e.getKey()), "field " + e.getKey());
        }
    }

    /** A field's value as text, for comparison. */
    static String describe(Coord c, String field) {
        return switch (field) {
            case "owners" -> holders(c.owners);
            case "queue" -> holders(c.queue);
            case "list" -> {
                StringBuilder sb = new StringBuilder();
                for (Coord.SessionEntry s : c.list) {
                    sb.append(s.session()).append('/').append(s.seqNo()).append('/').append(s.timeoutMs()).append('/')
                            .append(s.flags()).append('/').append(HEX.formatHex(s.desc())).append(';');
                }
                yield sb.toString();
            }
            default -> fieldBytes(c, field);
        };
    }

    static String holders(List<Coord.Holder> hs) {
        StringBuilder sb = new StringBuilder();
        for (Coord.Holder h : hs) {
            sb.append(h.orderId()).append('/').append(h.session()).append('/').append(h.count()).append('/')
                    .append(h.timeoutMs()).append('/').append(HEX.formatHex(h.data())).append(';');
        }
        return sb.toString();
    }

    static String fieldBytes(Coord c, String field) {
        return switch (field) {
            case "path" -> HEX.formatHex(c.path);
            case "name" -> HEX.formatHex(c.name);
            case "key" -> HEX.formatHex(c.key);
            case "desc" -> HEX.formatHex(c.desc);
            case "data" -> HEX.formatHex(c.data);
            case "message" -> HEX.formatHex(c.message);
            case "session" -> Long.toUnsignedString(c.session);
            case "seq_no" -> Long.toUnsignedString(c.seqNo);
            case "timeout_ms" -> Long.toUnsignedString(c.timeoutMs);
            case "limit" -> Long.toUnsignedString(c.limit);
            case "count" -> Long.toUnsignedString(c.count);
            case "order_id" -> Long.toUnsignedString(c.orderId);
            case "after" -> Long.toUnsignedString(c.after);
            case "version" -> Long.toUnsignedString(c.version);
            case "self_check_ms" -> String.valueOf(c.selfCheckMs);
            case "grace_ms" -> String.valueOf(c.graceMs);
            case "max_sessions" -> String.valueOf(c.maxSessions);
            case "max_semaphores" -> String.valueOf(c.maxSemaphores);
            case "max_waiters" -> String.valueOf(c.maxWaiters);
            case "sessions" -> String.valueOf(c.sessions);
            case "semaphores" -> String.valueOf(c.semaphores);
            case "waiters" -> String.valueOf(c.waiters);
            case "read_mode" -> String.valueOf(c.readMode);
            case "attach_mode" -> String.valueOf(c.attachMode);
            case "flags" -> String.valueOf(c.flags);
            case "reason" -> String.valueOf(c.reason);
            default -> throw new AssertionError("vector field " + field + " is unknown to this test");
        };
    }

    static long u64(Object v) {
        return Long.parseUnsignedLong((String) v);
    }

    static byte[] bytes(Object v) {
        return HEX.parseHex((String) ((Map<?, ?>) v).get("hex"));
    }

    @SuppressWarnings("unchecked")
    static void set(Coord c, String field, Object v) {
        switch (field) {
            case "path" -> c.path = bytes(v);
            case "name" -> c.name = bytes(v);
            case "key" -> c.key = bytes(v);
            case "desc" -> c.desc = bytes(v);
            case "data" -> c.data = bytes(v);
            case "message" -> c.message = bytes(v);
            case "session" -> c.session = u64(v);
            case "seq_no" -> c.seqNo = u64(v);
            case "timeout_ms" -> c.timeoutMs = u64(v);
            case "limit" -> c.limit = u64(v);
            case "count" -> c.count = u64(v);
            case "order_id" -> c.orderId = u64(v);
            case "after" -> c.after = u64(v);
            case "version" -> c.version = u64(v);
            case "self_check_ms" -> c.selfCheckMs = (Long) v;
            case "grace_ms" -> c.graceMs = (Long) v;
            case "max_sessions" -> c.maxSessions = (Long) v;
            case "max_semaphores" -> c.maxSemaphores = (Long) v;
            case "max_waiters" -> c.maxWaiters = (Long) v;
            case "sessions" -> c.sessions = (Long) v;
            case "semaphores" -> c.semaphores = (Long) v;
            case "waiters" -> c.waiters = (Long) v;
            case "read_mode" -> c.readMode = ((Long) v).intValue();
            case "attach_mode" -> c.attachMode = ((Long) v).intValue();
            case "flags" -> c.flags = ((Long) v).intValue();
            case "reason" -> c.reason = ((Long) v).intValue();
            case "owners", "queue" -> {
                List<Coord.Holder> hs = new ArrayList<>();
                for (Object o : (List<Object>) v) {
                    Map<String, Object> h = (Map<String, Object>) o;
                    hs.add(new Coord.Holder(u64(h.get("order_id")), u64(h.get("session")), u64(h.get("count")),
                            u64(h.get("timeout_ms")), bytes(h.get("data"))));
                }
                if (field.equals("owners")) {
                    c.owners = hs;
                } else {
                    c.queue = hs;
                }
            }
            case "list" -> {
                for (Object o : (List<Object>) v) {
                    Map<String, Object> s = (Map<String, Object>) o;
                    c.list.add(new Coord.SessionEntry(u64(s.get("session")), u64(s.get("seq_no")), u64(s.get("timeout_ms")),
                            ((Long) s.get("flags")).intValue(), bytes(s.get("desc"))));
                }
            }
            default -> throw new AssertionError("vector field " + field + " is unknown to this test");
        }
    }

    @Test
    void shortAndLongBodiesAreRefused() {
        byte[] attach = new Coord().encode(false, Coord.ATTACH, 0);
        WireException shortBody = assertThrows(WireException.class,
                () -> Coord.decode(false, Coord.ATTACH, 0, java.util.Arrays.copyOf(attach, attach.length - 1)));
        assertEquals(ErrorCode.MALFORMED_FRAME, shortBody.code());
        WireException longBody = assertThrows(WireException.class,
                () -> Coord.decode(false, Coord.ATTACH, 0, java.util.Arrays.copyOf(attach, attach.length + 1)));
        assertEquals(ErrorCode.MALFORMED_FRAME, longBody.code());
        WireException unknown = assertThrows(WireException.class, () -> Coord.decode(true, 99, 0, new byte[0]));
        assertEquals(ErrorCode.UNKNOWN_FRAME, unknown.code());
    }

    @Test
    void largeCoordinationFramesAreReadOnlyWhenAllowed() throws Exception {
        Frame big = new Frame(Type.COORD_REPLY);
        big.id = 1;
        big.op = Coord.DESCRIBE_SEMAPHORE;
        big.text = new byte[Type.MAX_FRAME + 10];
        byte[] b = Codec.encode(big);
        assertEquals(ErrorCode.FRAME_TOO_LARGE, assertThrows(WireException.class, () -> Codec.read(new ByteArrayInputStream(b))).code());
        assertEquals(big, Codec.read(new ByteArrayInputStream(b), true));
        byte[] ping = Codec.encode(new Frame(Type.PING));
        byte[] bigPing = java.nio.ByteBuffer.allocate(4 + Type.MAX_FRAME + 1).putInt(Type.MAX_FRAME + 1).put(ping, 4, ping.length - 4).array();
        assertEquals(ErrorCode.FRAME_TOO_LARGE, assertThrows(WireException.class, () -> Codec.read(new ByteArrayInputStream(bigPing), true)).code());
    }
}
