package io.ticketing.coordination;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * Service discovery: every member of a service registers its endpoint as
 * its owner data on the service's semaphore, {@code recipe/discovery/<name>}
 * (one unit, taken ephemeral, so the semaphore exists while anyone is
 * registered); {@link #listBlocking} and {@link #watch} read the owners. The
 * Go SDK's {@code Discovery} uses the same semaphore, so Go and Java members
 * of a service see each other. A semaphore of that name that is neither
 * ephemeral nor made by {@link #watch} (limit 2^64-1, the marker
 * {@code ticketing-recipe:discovery} as data) is refused with
 * {@link WrongKindException}. A registration ends with its lease: released,
 * or its session ended (a crashed member is gone once its session timeout
 * passes).
 */
public final class Discovery {
    private static final String KIND = "discovery";
    private static final long LIMIT = -1L; // 2^64-1

    private final Session s;
    private final String name;
    private final String sem;

    Discovery(Session s, String name) {
        this.s = s;
        this.name = name;
        this.sem = Recipes.name(KIND, name);
    }

    /**
     * One registered member of a service.
     *
     * @param session the member's session
     * @param token its registration's order id
     * @param data the endpoint it registered
     */
    public record Endpoint(long session, long token, byte[] data) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Endpoint e && e.session == session && e.token == token && Arrays.equals(e.data, data);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(session) * 31 + Long.hashCode(token) * 17 + Arrays.hashCode(data);
        }

        @Override
        public String toString() {
            return "Endpoint[session=" + Long.toUnsignedString(session) + ", token=" + Long.toUnsignedString(token) + ", " + data.length + " bytes]";
        }
    }

    private void check(SemaphoreDescription d) {
        boolean marked = (d.ephemeral() && d.data().length == 0) || Arrays.equals(d.data(), Recipes.marker(KIND));
        Recipes.checkKind(KIND, d, LIMIT, marked);
    }

    /**
     * Publishes endpoint for this session until the returned lease is
     * released or the session ends. Registering again replaces the
     * endpoint (the same hold, new data). Safe to retry: a re-sent acquire
     * replaces itself.
     *
     * @param endpoint the member's endpoint (an address, say), up to 1 MiB
     * @return the registration's lease
     */
    public Lease registerBlocking(byte[] endpoint) {
        try {
            check(s.describeSemaphoreBlocking(sem, false, false));
        } catch (NotFoundException e) {
            // the acquire creates it
        }
        return s.acquireBlocking(sem, AcquireOptions.shared().ephemeral().data(endpoint));
    }

    /**
     * The registered endpoints in registration (order id) order; none when
     * nobody is registered.
     *
     * @return the endpoints
     */
    public List<Endpoint> listBlocking() {
        try {
            SemaphoreDescription d = s.describeSemaphoreBlocking(sem, true, false);
            check(d);
            return endpoints(d);
        } catch (NotFoundException e) {
            return List.of();
        }
    }

    private static List<Endpoint> endpoints(SemaphoreDescription d) {
        List<Endpoint> out = new ArrayList<>(d.owners().size());
        for (Holder h : d.owners()) {
            out.add(new Endpoint(h.session(), h.orderId(), h.data()));
        }
        return List.copyOf(out);
    }

    private Subscription.Snapshot<List<Endpoint>> describeAndWatch() {
        while (true) {
            try {
                Session.Watched w = s.watchSemaphoreBlocking(sem, false, true);
                check(w.description());
                return new Subscription.Snapshot<>(endpoints(w.description()), w.changed());
            } catch (NotFoundException e) {
                // Nobody is registered, so there is nothing to watch: create
                // the semaphore as a persistent one that registrations can
                // join (their ephemeral flag only creates a missing one).
                try {
                    s.createSemaphoreBlocking(sem, LIMIT, Recipes.marker(KIND));
                } catch (AlreadyExistsException | io.ticketing.IndeterminateException again) {
                    // made meanwhile, or maybe by us: describe it
                }
            }
        }
    }

    /**
     * Calls callback with the endpoints at the start and every time they
     * change, until the subscription is closed or the session ends (see
     * {@link Subscription}). To watch a service nobody has registered yet it
     * creates the service's semaphore as a persistent one (limit 2^64-1),
     * which stays after the members leave.
     *
     * @param callback given each new list of endpoints
     * @return the running watch
     */
    public Subscription watch(Consumer<List<Endpoint>> callback) {
        return Subscription.start(s, this::describeAndWatch, List::equals, callback);
    }

    /**
     * {@link #registerBlocking} on the client's threads; cancelling the
     * future withdraws the registration.
     *
     * @param endpoint the member's endpoint, up to 1 MiB
     * @return the registration's lease
     */
    public CompletableFuture<Lease> registerAsync(byte[] endpoint) {
        return Async.interruptible(s.executor(), () -> registerBlocking(endpoint), Lease::releaseAsync);
    }

    /**
     * {@link #listBlocking} on the client's threads.
     *
     * @return the endpoints
     */
    public CompletableFuture<List<Endpoint>> listAsync() {
        return Async.interruptible(s.executor(), this::listBlocking, v -> {});
    }

    @Override
    public String toString() {
        return "Discovery[" + name + "]";
    }
}
