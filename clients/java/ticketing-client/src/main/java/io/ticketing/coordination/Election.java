package io.ticketing.coordination;

import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.Consumer;

/**
 * Elects one leader among sessions: the semaphore
 * {@code recipe/election/<name>} with limit 1 (created on first use, the
 * Go SDK's {@code Election} too) whose owner leads, with its data.
 */
public final class Election {
    private final Session s;
    private final String name;
    // Guards lease only (a ReentrantLock: a monitor pins virtual threads).
    private final ReentrantLock mu = new ReentrantLock();
    private final boolean[] checked = new boolean[1];
    private Lease lease;

    Election(Session s, String name) {
        this.s = s;
        this.name = name;
    }

    private String sem() {
        return Recipes.name("election", name);
    }

    /**
     * A won campaign: its lease (valid while the leadership stands; its end
     * says why it ended) and the leader's fencing token, to pass with every
     * write the leader makes.
     *
     * @param lease the hold that is the leadership
     * @param token the leadership's fencing token
     */
    public record Leadership(Lease lease, long token) {}

    /**
     * The leader: its session, token and data.
     *
     * @param session the leader's session (0: nobody leads)
     * @param token the leadership's fencing token
     * @param data the data the leader published
     */
    public record Leader(long session, long token, byte[] data) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Leader l && l.session == session && l.token == token && Arrays.equals(l.data, data);
        }

        @Override
        public int hashCode() {
            return Long.hashCode(session) * 31 + Long.hashCode(token) * 17 + Arrays.hashCode(data);
        }

        @Override
        public String toString() {
            return "Leader[session=" + Long.toUnsignedString(session) + ", token=" + Long.toUnsignedString(token) + ", " + data.length + " bytes]";
        }
    }

    /**
     * Waits until this session leads, publishing data (its address, say) as the leader's.
     *
     * @param data the leader's data while this session leads
     * @return the leadership: its lease and fencing token
     */
    public Leadership campaignBlocking(byte[] data) {
        Lease l = Recipes.acquireOne(s, "election", sem(), checked, AcquireOptions.shared().data(data));
        mu.lock();
        try {
            lease = l;
        } finally {
            mu.unlock();
        }
        return new Leadership(l, l.token());
    }

    /** Gives up the leadership or withdraws the campaign; NotLeadingException when the session does neither. */
    public void resignBlocking() {
        Lease l;
        mu.lock();
        try {
            l = lease;
            lease = null;
        } finally {
            mu.unlock();
        }
        boolean released = s.release(sem());
        if (l != null) {
            s.forget(l);
            l.end(new ReleasedException("coordination: resigned " + name));
        }
        if (!released) {
            throw new NotLeadingException("coordination: resign " + name + ": session " + s.id() + " neither leads nor campaigns in it");
        }
    }

    /**
     * The current leader.
     *
     * @return the leader: its session (0 when nobody leads), token and data
     */
    public Leader leaderBlocking() {
        return leader(false).value();
    }

    private Subscription.Snapshot<Leader> leader(boolean watch) {
        while (true) {
            SemaphoreDescription d;
            CompletableFuture<Integer> changed = null;
            try {
                if (watch) {
                    Session.Watched w = s.watchSemaphoreBlocking(sem(), true, true);
                    d = w.description();
                    changed = w.changed();
                } else {
                    d = s.describeSemaphoreBlocking(sem(), true, false);
                }
            } catch (NotFoundException e) {
                Recipes.ensure(s, "election", sem());
                continue;
            }
            Recipes.checkKind("election", d);
            List<Holder> owners = d.owners();
            if (owners.isEmpty()) {
                return new Subscription.Snapshot<>(new Leader(0, 0, new byte[0]), changed);
            }
            Holder o = owners.get(0);
            return new Subscription.Snapshot<>(new Leader(o.session(), o.orderId(), o.data()), changed);
        }
    }

    /**
     * Calls callback with the leader at the start and every time it changes
     * (session 0: nobody leads), until the subscription is closed or the
     * session ends (see {@link Subscription}). It describes again after
     * every watch notification, including the empty one of a lost
     * connection.
     *
     * @param callback given each new leader
     * @return the running watch
     */
    public Subscription observe(Consumer<Leader> callback) {
        return Subscription.start(s, () -> leader(true), Leader::equals, callback);
    }

    /**
     * {@link #campaignBlocking} on the client's threads. Cancelling the
     * future withdraws the campaign (a leadership won anyway is resigned).
     *
     * @param data the leader's data while this session leads
     * @return the leadership: its lease and fencing token
     */
    public CompletableFuture<Leadership> campaignAsync(byte[] data) {
        return Async.interruptible(s.executor(), () -> campaignBlocking(data), l -> l.lease().releaseAsync());
    }

    /**
     * {@link #resignBlocking} on the client's threads.
     *
     * @return completes when resigned
     */
    public CompletableFuture<Void> resignAsync() {
        return Async.interruptible(s.executor(), this::resignBlocking);
    }

    /**
     * {@link #leaderBlocking} on the client's threads.
     *
     * @return the leader
     */
    public CompletableFuture<Leader> leaderAsync() {
        return Async.interruptible(s.executor(), this::leaderBlocking, v -> {});
    }
}
