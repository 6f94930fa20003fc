package io.ticketing.coordination;

import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

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
    public record Leader(long session, long token, byte[] data) {}

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
        while (true) {
            SemaphoreDescription d;
            try {
                d = s.describeSemaphoreBlocking(sem(), true, false);
            } catch (NotFoundException e) {
                Recipes.ensure(s, "election", sem());
                continue;
            }
            Recipes.checkKind("election", d);
            List<Holder> owners = d.owners();
            if (owners.isEmpty()) {
                return new Leader(0, 0, new byte[0]);
            }
            Holder o = owners.get(0);
            return new Leader(o.session(), o.orderId(), o.data());
        }
    }
}
