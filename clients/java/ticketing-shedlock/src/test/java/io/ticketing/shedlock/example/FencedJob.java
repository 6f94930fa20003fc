package io.ticketing.shedlock.example;

import io.ticketing.jdbc.JdbcFence;
import io.ticketing.shedlock.TicketingLockProvider;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.function.Supplier;
import net.javacrumbs.shedlock.core.DefaultLockingTaskExecutor;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.LockingTaskExecutor;

/**
 * The fenced-write pattern under a ShedLock job: the job runs under the
 * lock "nightly-report" and its write commits only if the lock's fencing
 * token is the newest the database has seen for that job. A process that
 * paused past lockAtMostFor while another took the lock over gets
 * {@link io.ticketing.jdbc.StaleTokenException} and writes nothing.
 *
 * <p>With Spring's {@code @SchedulerLock(name = "nightly-report", ...)} the
 * body of {@link #runOnce()} is the annotated method's: it asks the
 * provider for its token by the lock's name.
 */
public final class FencedJob {
    /** The lock's name, and the fenced key in the database. */
    public static final String LOCK = "nightly-report";

    private final TicketingLockProvider locks;
    private final LockingTaskExecutor executor;
    private final Supplier<Connection> database;
    private final JdbcFence fence;
    private final Duration lockAtMostFor;

    /**
     * A job writing through database under locks.
     *
     * @param locks the ShedLock provider
     * @param database opens a connection to the database
     * @param fence the fence of that database
     * @param lockAtMostFor the job's lockAtMostFor
     */
    public FencedJob(TicketingLockProvider locks, Supplier<Connection> database, JdbcFence fence, Duration lockAtMostFor) {
        this.locks = locks;
        this.executor = new DefaultLockingTaskExecutor(locks);
        this.database = database;
        this.fence = fence;
        this.lockAtMostFor = lockAtMostFor;
    }

    /**
     * Runs the job if no other process holds its lock.
     *
     * @return whether it ran
     */
    public boolean runOnce() {
        LockingTaskExecutor.TaskResult<Long> r;
        try {
            r = executor.executeWithLock(() -> {
                long token = locks.tokenOf(LOCK).orElseThrow();
                write(token, "report at token " + token);
                return token;
            }, new LockConfiguration(Instant.now(), LOCK, lockAtMostFor, Duration.ZERO));
        } catch (Throwable t) {
            throw t instanceof RuntimeException e ? e : new IllegalStateException(t);
        }
        return r.wasExecuted();
    }

    /**
     * The write, fenced by token in the same transaction.
     *
     * @param token the lock's fencing token
     * @param text what the job writes
     * @throws SQLException {@link io.ticketing.jdbc.StaleTokenException} when a newer holder wrote first
     */
    public void write(long token, String text) throws SQLException {
        try (Connection c = database.get()) {
            c.setAutoCommit(false);
            try {
                fence.check(c, LOCK, token); // throws StaleTokenException when a newer holder wrote first
                try (PreparedStatement ps = c.prepareStatement("INSERT INTO reports(token, text) VALUES (?, ?)")) {
                    ps.setLong(1, token);
                    ps.setString(2, text);
                    ps.executeUpdate();
                }
                c.commit();
            } catch (SQLException | RuntimeException e) {
                c.rollback();
                throw e;
            }
        }
    }
}
