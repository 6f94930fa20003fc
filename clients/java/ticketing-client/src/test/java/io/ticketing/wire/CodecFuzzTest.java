package io.ticketing.wire;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.io.EOFException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

/**
 * A fuzz target for the decoder (and the coordination body decoder of K
 * and T frames, {@link Coord}), seeded with every vector and mutated at
 * random (fixed seed; TICKETING_FUZZ_SEED and TICKETING_FUZZ_ITERATIONS run it
 * longer or differently). Whatever the bytes, the decoder either returns a
 * frame that re-encodes to exactly the bytes it consumed, or refuses them
 * with a protocol code (1, 2 or 3; 2 without reading past the length prefix)
 * or an end of stream, and never fails any other way.
 */
class CodecFuzzTest {
    @Test
    void decoderInvariantsUnderMutation() throws Exception {
        long seed = Long.parseLong(System.getenv().getOrDefault("TICKETING_FUZZ_SEED", "20261130"));
        int iterations = Integer.parseInt(System.getenv().getOrDefault("TICKETING_FUZZ_ITERATIONS", "200000"));
        List<byte[]> corpus = new ArrayList<>();
        for (Map<String, Object> v : VectorsTest.vectors()) {
            corpus.add(HexFormat.of().parseHex((String) v.get("hex")));
        }
        Random r = new Random(seed);
        for (int i = 0; i < iterations; i++) {
            byte[] in = mutate(corpus.get(r.nextInt(corpus.size())), r);
            check(in, seed, i);
        }
    }

    static byte[] mutate(byte[] b, Random r) {
        byte[] m = b.clone();
        int ops = 1 + r.nextInt(4);
        for (int k = 0; k < ops; k++) {
            switch (r.nextInt(6)) {
                case 0 -> { // flip a byte
                    if (m.length > 0) {
                        m[r.nextInt(m.length)] ^= (byte) (1 + r.nextInt(255));
                    }
                }
                case 1 -> m = Arrays.copyOf(m, r.nextInt(m.length + 1)); // truncate
                case 2 -> { // append junk
                    byte[] junk = new byte[1 + r.nextInt(8)];
                    r.nextBytes(junk);
                    byte[] n = Arrays.copyOf(m, m.length + junk.length);
                    System.arraycopy(junk, 0, n, m.length, junk.length);
                    m = n;
                }
                case 3 -> { // make the length prefix consistent with the body again
                    if (m.length >= 4) {
                        int len = m.length - 4;
                        m[0] = (byte) (len >>> 24);
                        m[1] = (byte) (len >>> 16);
                        m[2] = (byte) (len >>> 8);
                        m[3] = (byte) len;
                    }
                }
                case 4 -> { // a random type byte
                    if (m.length > 4) {
                        m[4] = (byte) r.nextInt(256);
                    }
                }
                default -> { // a random length prefix
                    if (m.length >= 4) {
                        int len = r.nextBoolean() ? r.nextInt(70_000) : r.nextInt();
                        m[0] = (byte) (len >>> 24);
                        m[1] = (byte) (len >>> 16);
                        m[2] = (byte) (len >>> 8);
                        m[3] = (byte) len;
                    }
                }
            }
        }
        return m;
    }

    static void check(byte[] in, long seed, int i) {
        VectorsTest.CountingStream s = new VectorsTest.CountingStream(in);
        String where = "seed " + seed + " iteration " + i + " input " + HexFormat.of().formatHex(in);
        try {
            Frame f = Codec.read(s);
            byte[] consumed = Arrays.copyOf(in, s.consumed);
            assertArrayEquals(consumed, Codec.encode(f), "a decoded frame does not re-encode to its bytes: " + where);
            if (f.type == Type.COORD || f.type == Type.COORD_REPLY) {
                boolean reply = f.type == Type.COORD_REPLY;
                try {
                    Coord c = Coord.decode(reply, f.op, f.code, f.text);
                    assertArrayEquals(f.text, c.encode(reply, f.op, f.code), "a decoded coordination body does not re-encode to its bytes: " + where);
                } catch (WireException e) {
                    assertTrue(e.code() == ErrorCode.MALFORMED_FRAME || e.code() == ErrorCode.UNKNOWN_FRAME, "coordination body code " + e.code() + ": " + where);
                }
            }
        } catch (WireException e) {
            assertTrue(e.code() >= 1 && e.code() <= 3, "code " + e.code() + ": " + where);
            if (e.code() == ErrorCode.FRAME_TOO_LARGE) {
                assertEquals(4, s.consumed, "read past the length prefix of a too-large frame: " + where);
            }
        } catch (EOFException e) {
            // a short input: fine
        } catch (Throwable t) {
            fail("the decoder failed with " + t + ": " + where, t);
        }
    }
}
