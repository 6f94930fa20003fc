package io.ticketing.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.Json;
import java.io.ByteArrayInputStream;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;

/**
 * The Java codec against every vector of testdata/vectors.json, in both
 * directions: valid vectors decode to exactly their frame and encode to
 * exactly their bytes; decode vectors are refused with their code (code 2
 * without reading past the length prefix); validate vectors decode but fail
 * {@link Codec#validate}.
 */
class VectorsTest {
    static final HexFormat HEX = HexFormat.of();

    /**
     * Every vector, the coordination frames K and T included (their bodies
     * are checked field by field by {@link CoordVectorsTest}).
     */
    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> vectors() throws Exception {
        Path p = Path.of(System.getProperty("ticketing.repo.root", "../../.."), "testdata", "vectors.json");
        Map<String, Object> file = (Map<String, Object>) Json.parse(Files.readString(p));
        List<Map<String, Object>> all = (List<Map<String, Object>>) file.get("vectors");
        return new ArrayList<>(all);
    }

    /** The frame a vector describes, built from its JSON fields. */
    static Frame frameOf(Map<String, Object> j) {
        Frame f = new Frame((byte) ((String) j.get("type")).charAt(0));
        for (Map.Entry<String, Object> e : j.entrySet()) {
            Object v = e.getValue();
            switch (e.getKey()) {
                case "type", "text", "key", "body" -> {
                    // text, key and body are given authoritatively as *_hex
                }
                case "op" -> f.op = num(v);
                case "status" -> f.code = num(v);
                case "body_hex" -> f.text = HEX.parseHex((String) v);
                case "version" -> f.version = num(v);
                case "flags" -> f.flags = num(v);
                case "id" -> f.id = (Long) v;
                case "owner" -> f.owner = HEX.parseHex((String) v);
                case "cluster_id" -> f.clusterId = HEX.parseHex((String) v);
                case "wait" -> f.waitSec = num(v);
                case "lease" -> f.leaseSec = num(v);
                case "key_hex" -> f.key = HEX.parseHex((String) v);
                case "text_hex" -> f.text = HEX.parseHex((String) v);
                case "token" -> f.token = Long.parseUnsignedLong((String) v);
                case "nonce" -> f.nonce = Long.parseUnsignedLong((String) v);
                case "lease_ms" -> f.leaseMs = (Long) v;
                case "queued_ms" -> f.queuedMs = (Long) v;
                case "count" -> f.count = (Long) v;
                case "reason" -> f.reason = num(v);
                case "code" -> f.code = num(v);
                case "interval_ms" -> f.intervalMs = (Long) v;
                case "idle_interval_ms" -> f.idleIntervalMs = (Long) v;
                case "remaining_ms" -> f.remainingMs = (Long) v;
                default -> throw new AssertionError("vector field " + e.getKey() + " is unknown to this test");
            }
        }
        return f;
    }

    static int num(Object v) {
        return ((Long) v).intValue();
    }

    @TestFactory
    Stream<DynamicTest> everyVector() throws Exception {
        List<DynamicTest> tests = new ArrayList<>();
        for (Map<String, Object> v : vectors()) {
            String name = (String) v.get("name");
            tests.add(DynamicTest.dynamicTest(name, () -> check(v)));
        }
        return tests.stream();
    }

    @SuppressWarnings("unchecked")
    static void check(Map<String, Object> v) throws Exception {
        byte[] bytes = HEX.parseHex((String) v.get("hex"));
        boolean valid = (Boolean) v.get("valid");
        if (valid || "validate".equals(v.get("stage"))) {
            Frame want = frameOf((Map<String, Object>) v.get("frame"));
            Frame got = Codec.read(new ByteArrayInputStream(bytes));
            assertEquals(want, got, "decode");
            assertArrayEquals(bytes, Codec.encode(want), "encode");
            String problem = Codec.validate(got);
            if (valid) {
                assertNull(problem, "a valid vector failed validation");
            } else {
                assertNotNull(problem, "validate vector passed validation");
                if (got.type == Type.COORD || got.type == Type.COORD_REPLY) {
                    WireException e = assertThrows(WireException.class,
                            () -> Coord.decode(got.type == Type.COORD_REPLY, got.op, got.code, got.text));
                    assertEquals(num(v.get("error_code")), e.code(), e.getMessage());
                } else {
                    assertEquals(8L, v.get("error_code"));
                }
            }
            return;
        }
        assertEquals("decode", v.get("stage"));
        int code = num(v.get("error_code"));
        CountingStream in = new CountingStream(bytes);
        WireException e = assertThrows(WireException.class, () -> Codec.read(in));
        assertEquals(code, e.code(), e.getMessage());
        if (code == ErrorCode.FRAME_TOO_LARGE) {
            assertEquals(4, in.consumed, "a too-large frame was read past its length prefix");
        }
    }

    @Test
    void everyTypeIsCovered() throws Exception {
        Set<Character> seen = new java.util.TreeSet<>();
        for (Map<String, Object> v : vectors()) {
            if ((Boolean) v.get("valid")) {
                seen.add(((String) ((Map<?, ?>) v.get("frame")).get("type")).charAt(0));
            }
        }
        for (char c : "HACLUDJYGWQXBRNMEIVFPOKT".toCharArray()) {
            assertTrue(seen.contains(c), "no valid vector for type " + c);
        }
    }

    @Test
    void eofInsideAFrameIsNotAFrame() {
        byte[] b = HEX.parseHex("00000009500123");
        assertThrows(java.io.EOFException.class, () -> Codec.read(new ByteArrayInputStream(b)));
        assertFalse(Codec.validate(new Frame(Type.PING)) != null);
    }

    /** Counts the bytes a decoder consumed. */
    static final class CountingStream extends InputStream {
        final byte[] b;
        int consumed;

        CountingStream(byte[] b) {
            this.b = b;
        }

        @Override
        public int read() {
            return consumed < b.length ? b[consumed++] & 0xff : -1;
        }

        @Override
        public int read(byte[] dst, int off, int len) {
            if (consumed >= b.length) {
                return -1;
            }
            int n = Math.min(len, b.length - consumed);
            System.arraycopy(b, consumed, dst, off, n);
            consumed += n;
            return n;
        }
    }
}
