package io.ticketing.coordination;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The recipes' semaphores, as the Go SDK keeps them, so that Go and Java
 * processes share one recipe on one node: each kind in its own name space
 * ({@code recipe/<kind>/<name>}), created with limit 1 and the marker
 * {@code ticketing-recipe:<kind>} as its data; a semaphore with another
 * limit or data is refused ({@link WrongKindException}).
 */
final class Recipes {
    private Recipes() {}

    static final String SPACE = "recipe/";

    static String name(String kind, String name) {
        return SPACE + kind + "/" + name;
    }

    static byte[] marker(String kind) {
        return ("ticketing-recipe:" + kind).getBytes(StandardCharsets.UTF_8);
    }

    /** Refuses d unless it has limit 1 and exactly kind's marker as its data (a mutex's or an election's). */
    static void checkKind(String kind, SemaphoreDescription d) {
        checkKind(kind, d, 1, Arrays.equals(d.data(), marker(kind)));
    }

    /** Refuses d unless it has the limit and data (marked) that kind gives its semaphores. */
    static void checkKind(String kind, SemaphoreDescription d, long limit, boolean marked) {
        if (d.limit() != limit || !marked) {
            throw wrongKind(kind, d);
        }
    }

    static WrongKindException wrongKind(String kind, SemaphoreDescription d) {
        return new WrongKindException("coordination: semaphore \"" + d.name() + "\" (limit " + Long.toUnsignedString(d.limit()) + ", "
                + d.data().length + " bytes of data) was not created by a " + kind + " of this client: refusing to use it as one");
    }

    /** Creates kind's semaphore unless it exists, and checks that an existing one is kind's. */
    static void ensure(Session s, String kind, String sem) {
        while (true) {
            try {
                s.createSemaphoreBlocking(sem, 1, marker(kind));
                return;
            } catch (AlreadyExistsException | io.ticketing.IndeterminateException e) {
                // exists (or the create's answer was lost): check it
            }
            try {
                checkKind(kind, s.describeSemaphoreBlocking(sem, false, false));
                return;
            } catch (NotFoundException e) {
                // deleted meanwhile (or the create was lost): again
            }
        }
    }

    /** Takes kind's semaphore (created if missing, checked once per handle). */
    static Lease acquireOne(Session s, String kind, String sem, boolean[] checked, AcquireOptions o) {
        while (true) {
            if (!checked[0]) {
                ensure(s, kind, sem);
                checked[0] = true;
            }
            try {
                return s.acquireBlocking(sem, o);
            } catch (NotFoundException e) {
                checked[0] = false; // deleted meanwhile: create it again
            }
        }
    }
}
