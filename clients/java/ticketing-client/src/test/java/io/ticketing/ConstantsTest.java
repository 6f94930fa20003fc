package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.wire.ErrorCode;
import io.ticketing.wire.Type;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * This client's protocol constants against the constants section of
 * testdata/vectors.json, which the Go generator writes from the protocol's
 * one definition. Driven by the file: a code, type or reason added to the
 * protocol fails here until this client defines it, and a constant this
 * client defines that the protocol does not know fails too.
 */
class ConstantsTest {
    @SuppressWarnings("unchecked")
    static Map<String, Object> constants() throws Exception {
        Path p = Path.of(System.getProperty("ticketing.repo.root", "../../.."), "testdata", "vectors.json");
        Map<String, Object> file = (Map<String, Object>) Json.parse(Files.readString(p));
        Map<String, Object> c = (Map<String, Object>) file.get("constants");
        assertTrue(c != null, p + " has no constants section");
        return c;
    }

    @SuppressWarnings("unchecked")
    static List<Map<String, Object>> list(Map<String, Object> c, String name) {
        List<Map<String, Object>> l = (List<Map<String, Object>>) c.get(name);
        assertFalse(l == null || l.isEmpty(), "constants." + name + " is missing");
        return l;
    }

    /** The public static final fields of cls whose type is t, by name. */
    static Map<String, Long> fields(Class<?> cls, Class<?> t) throws IllegalAccessException {
        Map<String, Long> out = new LinkedHashMap<>();
        for (Field f : cls.getDeclaredFields()) {
            int m = f.getModifiers();
            if (Modifier.isPublic(m) && Modifier.isStatic(m) && Modifier.isFinal(m) && f.getType() == t) {
                out.put(f.getName(), ((Number) f.get(null)).longValue());
            }
        }
        return out;
    }

    /** Each entry's name upper-cased must be a field of that value; no other field of the kind. */
    static void check(String what, Map<String, Long> defined, List<Map<String, Object>> entries, String valueKey) {
        List<String> problems = new ArrayList<>();
        Map<String, Long> left = new LinkedHashMap<>(defined);
        for (Map<String, Object> e : entries) {
            String name = ((String) e.get("name")).toUpperCase(Locale.ROOT);
            Object v = e.get(valueKey);
            long want = v instanceof String s ? s.charAt(0) : ((Number) v).longValue();
            Long got = left.remove(name);
            if (got == null) {
                problems.add(what + " " + name + " = " + want + " is not defined");
            } else if (got != want) {
                problems.add(what + " " + name + " is " + got + ", the protocol says " + want);
            }
        }
        for (String name : left.keySet()) {
            problems.add(what + " " + name + " is not in the protocol's constants");
        }
        assertTrue(problems.isEmpty(), String.join("\n", problems));
    }

    @Test
    void errorCodesAreTheProtocols() throws Exception {
        check("ErrorCode", fields(ErrorCode.class, int.class), list(constants(), "error_codes"), "code");
    }

    @Test
    void frameTypesAreTheProtocols() throws Exception {
        check("Type", fields(Type.class, byte.class), list(constants(), "frame_types"), "letter");
    }

    @Test
    void reasonsAreTheProtocols() throws Exception {
        check("CapacityException", fields(CapacityException.class, int.class), list(constants(), "capacity_reasons"), "value");
        check("PermissionDeniedException", fields(PermissionDeniedException.class, int.class), list(constants(), "forbidden_reasons"), "value");
    }

    @Test
    @SuppressWarnings("unchecked")
    void limitsAreTheProtocols() throws Exception {
        Map<String, Object> c = constants();
        Map<String, Object> limits = (Map<String, Object>) c.get("limits");
        Map<String, Object> flags = (Map<String, Object>) c.get("flags");
        assertEquals(((Number) limits.get("version")).intValue(), Type.VERSION);
        assertEquals(((Number) limits.get("max_frame")).intValue(), Type.MAX_FRAME);
        assertEquals(((Number) limits.get("max_coord_frame")).intValue(), Type.MAX_COORD_FRAME);
        assertEquals(((Number) flags.get("ready_sessions")).intValue(), Type.READY_SESSIONS);
        assertEquals(((Number) limits.get("max_key")).intValue(), Type.MAX_KEY);
        assertEquals(((Number) limits.get("max_key")).intValue(), TicketBroker.MAX_KEY);
        assertEquals(((Number) limits.get("max_token")).intValue(), Type.MAX_TOKEN);
        assertEquals(((Number) limits.get("max_wait_s")).intValue(), Type.MAX_WAIT);
        assertEquals(((Number) limits.get("min_lease_s")).intValue(), Type.MIN_LEASE);
        assertEquals(((Number) limits.get("max_lease_s")).intValue(), Type.MAX_LEASE);
        assertEquals(Duration.ofSeconds(Type.MAX_WAIT), TicketBroker.MAX_WAIT);
        assertEquals(Duration.ofSeconds(Type.MIN_LEASE), TicketBroker.MIN_LEASE);
        assertEquals(Duration.ofSeconds(Type.MAX_LEASE), TicketBroker.MAX_LEASE);
        assertEquals(((Number) flags.get("hello_admin")).intValue(), Type.HELLO_ADMIN);
        assertEquals(((Number) flags.get("hello_cluster_id")).intValue(), Type.HELLO_CLUSTER_ID);
        assertEquals(((Number) flags.get("ready_cluster_id")).intValue(), Type.READY_CLUSTER_ID);
        assertEquals(((Number) flags.get("hello_idle_pings")).intValue(), Type.HELLO_IDLE_PINGS);
        assertEquals(((Number) flags.get("ready_idle_pings")).intValue(), Type.READY_IDLE_PINGS);
        assertEquals(((Number) limits.get("cluster_id_len")).intValue(), Type.CLUSTER_ID_LEN);
        assertEquals(((Number) flags.get("ready_leader")).intValue(), Type.READY_LEADER);
        assertEquals(((Number) flags.get("ready_sessions")).intValue(), Type.READY_SESSIONS);
        assertEquals(((Number) flags.get("info_held")).intValue(), Type.INFO_HELD);
    }
}
