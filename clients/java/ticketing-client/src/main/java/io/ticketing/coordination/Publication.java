package io.ticketing.coordination;

import java.util.Arrays;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Configuration publication: one value (any bytes) kept in the data of the
 * persistent semaphore {@code recipe/publication/<name>} (limit 1) after the
 * marker {@code ticketing-recipe:publication}, published by
 * {@link #publishBlocking} and followed by {@link #getBlocking} and
 * {@link #watch} through data watches; the Go SDK's {@code Publication}
 * uses the same semaphore and data. The marker alone means unset (a watch
 * creates it so), the marker and {@code '='} then the value means set, so an
 * empty value is told from none. A semaphore of that name with another
 * limit or data is refused with {@link WrongKindException}.
 */
public final class Publication {
    private static final String KIND = "publication";

    private final Session s;
    private final String sem;

    Publication(Session s, String name) {
        this.s = s;
        this.sem = Recipes.name(KIND, name);
    }

    private static byte[] data(byte[] value) {
        byte[] m = Recipes.marker(KIND);
        byte[] out = Arrays.copyOf(m, m.length + 1 + value.length);
        out[m.length] = '=';
        System.arraycopy(value, 0, out, m.length + 1, value.length);
        return out;
    }

    /** The published value, null when unset; WrongKindException when d is not a publication's. */
    private static byte @Nullable [] value(SemaphoreDescription d) {
        byte[] m = Recipes.marker(KIND);
        byte[] b = d.data();
        boolean marked = b.length >= m.length && Arrays.equals(b, 0, m.length, m, 0, m.length)
                && (b.length == m.length || b[m.length] == '=');
        Recipes.checkKind(KIND, d, 1, marked);
        return b.length == m.length ? null : Arrays.copyOfRange(b, m.length + 1, b.length);
    }

    /**
     * Sets the value, creating its semaphore if missing. Publishing the
     * same value twice is harmless, so an update whose answer was lost with
     * the connection is sent again after the session is restored.
     *
     * @param value the value, up to 1 MiB less the marker
     */
    public void publishBlocking(byte[] value) {
        byte[] data = data(value);
        while (true) {
            SemaphoreDescription d;
            try {
                d = s.describeSemaphoreBlocking(sem, false, false);
            } catch (NotFoundException e) {
                try {
                    s.createSemaphoreBlocking(sem, 1, data);
                    return;
                } catch (AlreadyExistsException | io.ticketing.IndeterminateException again) {
                    continue; // created meanwhile, or maybe by us: check it and set the value
                }
            }
            value(d);
            try {
                s.updateSemaphoreBlocking(sem, data);
                return;
            } catch (NotFoundException | io.ticketing.IndeterminateException e) {
                // idempotent: set it again (or create it again)
            }
        }
    }

    /**
     * The value; NotFoundException when it was never published (or its
     * semaphore exists unset, as a watch creates it).
     *
     * @return the value (an empty value is an empty array)
     */
    public byte[] getBlocking() {
        byte[] v = value(s.describeSemaphoreBlocking(sem, false, false));
        if (v == null) {
            throw new NotFoundException("coordination: publication " + sem + " is not set");
        }
        return v;
    }

    private Subscription.Snapshot<byte @Nullable []> describeAndWatch() {
        while (true) {
            try {
                Session.Watched w = s.watchSemaphoreBlocking(sem, true, false);
                return new Subscription.Snapshot<>(value(w.description()), w.changed());
            } catch (NotFoundException e) {
                try {
                    s.createSemaphoreBlocking(sem, 1, Recipes.marker(KIND)); // unset, so that it can be watched
                } catch (AlreadyExistsException | io.ticketing.IndeterminateException again) {
                    // made meanwhile, or maybe by us: describe it
                }
            }
        }
    }

    /**
     * Calls callback with the value at the start and every time it changes
     * (null: unset; an empty array: an empty value), until the subscription
     * is closed or the session ends (see {@link Subscription}). A value not
     * yet published has its semaphore created unset, so that it can be
     * watched.
     *
     * @param callback given each new value
     * @return the running watch
     */
    public Subscription watch(Consumer<byte @Nullable []> callback) {
        return Subscription.start(s, this::describeAndWatch, Arrays::equals, callback);
    }

    /**
     * {@link #publishBlocking} on the client's threads.
     *
     * @param value the value
     * @return completes when the value is published
     */
    public CompletableFuture<Void> publishAsync(byte[] value) {
        return Async.interruptible(s.executor(), () -> publishBlocking(value));
    }

    /**
     * {@link #getBlocking} on the client's threads.
     *
     * @return the value
     */
    public CompletableFuture<byte[]> getAsync() {
        return Async.interruptible(s.executor(), this::getBlocking, v -> {});
    }
}
