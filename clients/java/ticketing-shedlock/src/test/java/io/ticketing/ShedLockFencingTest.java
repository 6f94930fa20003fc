package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.jdbc.JdbcFence;
import io.ticketing.jdbc.StaleTokenException;
import io.ticketing.shedlock.FencedLock;
import io.ticketing.shedlock.TicketingLockProvider;
import io.ticketing.shedlock.example.FencedJob;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.Optional;
import java.util.function.Supplier;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The provider's own rules against a real ticketd: its two forms exclude each other, tokens fence writes. */
@Timeout(120)
class ShedLockFencingTest {
    static Ticketd cluster;
    static TicketBroker brokerA;
    static TicketBroker brokerB;
    static TicketingLockProvider a;
    static TicketingLockProvider b;

    @BeforeAll
    static void start() throws Exception {
        cluster = new Ticketd(1);
        String addr = cluster.awaitLeader(30_000).addr;
        brokerA = TicketBroker.connect(addr);
        brokerB = TicketBroker.connect(addr);
        a = TicketingLockProvider.create(brokerA);
        b = TicketingLockProvider.create(brokerB);
    }

    @AfterAll
    static void stop() throws Exception {
        a.close();
        b.close();
        brokerA.close();
        brokerB.close();
        cluster.close();
    }

    static LockConfiguration config(String name, Duration atMost) {
        return new LockConfiguration(Instant.now(), name, atMost, Duration.ZERO);
    }

    /**
     * A lock held as a ticket (lockAtMostFor up to 250 s) keeps out a lock of
     * the same name held as a semaphore (longer), and the other way round,
     * across two processes; each form's token is above the one before.
     */
    @Test
    void theTwoFormsExcludeEachOther() {
        SimpleLock ticket = a.lock(config("forms", Duration.ofSeconds(60))).orElseThrow();
        long t1 = ((FencedLock) ticket).token();
        assertEquals(Optional.empty(), b.lock(config("forms", Duration.ofMinutes(5))), "a semaphore lock while a ticket lock is held");
        ticket.unlock();

        SimpleLock semaphore = b.lock(config("forms", Duration.ofMinutes(5))).orElseThrow();
        long t2 = ((FencedLock) semaphore).token();
        assertTrue(t2 > t1, "semaphore token " + t2 + " after ticket token " + t1);
        assertEquals(Optional.empty(), a.lock(config("forms", Duration.ofSeconds(60))), "a ticket lock while a semaphore lock is held");
        semaphore.unlock();

        SimpleLock again = a.lock(config("forms", Duration.ofSeconds(60))).orElseThrow();
        assertTrue(((FencedLock) again).token() > t2);
        again.unlock();
    }

    /**
     * The fenced-write example: the job writes under its lock; a holder
     * whose 1 s lock ran out while another process took the job over cannot
     * write with its old token.
     */
    @Test
    void aJobWritesOnlyWithTheNewestToken() throws Exception {
        Path dir = Files.createTempDirectory("shedlock-fence");
        String url = "jdbc:sqlite:" + dir.resolve("jobs.db") + "?busy_timeout=5000";
        Supplier<Connection> db = () -> {
            try {
                return DriverManager.getConnection(url);
            } catch (SQLException e) {
                throw new IllegalStateException(e);
            }
        };
        JdbcFence fence = new JdbcFence(JdbcFence.Dialect.SQLITE);
        try (Connection c = db.get(); Statement s = c.createStatement()) {
            fence.createTable(c);
            s.execute("CREATE TABLE reports(token INTEGER NOT NULL, text TEXT NOT NULL)");
        }
        FencedJob first = new FencedJob(a, db, fence, Duration.ofSeconds(1));
        FencedJob second = new FencedJob(b, db, fence, Duration.ofSeconds(30));
        assertTrue(first.runOnce(), "the job ran under its lock");

        // The first process pauses inside its job past its 1 s lock.
        SimpleLock paused = a.lock(config(FencedJob.LOCK, Duration.ofSeconds(1))).orElseThrow();
        long stale = ((FencedLock) paused).token();
        long end = System.nanoTime() + Duration.ofSeconds(30).toNanos();
        boolean ran = false;
        while (!ran && System.nanoTime() < end) {
            ran = second.runOnce(); // refused until the first's ticket has expired on the server
        }
        assertTrue(ran, "another process ran the job once the paused lock expired");
        assertFalse(((FencedLock) paused).isValid());
        assertThrows(StaleTokenException.class, () -> first.write(stale, "late write"));
        try (Connection c = db.get(); Statement s = c.createStatement(); ResultSet rs = s.executeQuery("SELECT count(*) FROM reports WHERE text = 'late write'")) {
            rs.next();
            assertEquals(0, rs.getInt(1), "the stale holder wrote nothing");
        }
    }

    /** Closing a provider releases its locks on the server: another process takes them at once. */
    @Test
    void closeReleasesTheLocks() {
        try (TicketingLockProvider closing = TicketingLockProvider.create(brokerB)) {
            closing.lock(config("closing-ticket", Duration.ofSeconds(60))).orElseThrow();
            closing.lock(config("closing-semaphore", Duration.ofMinutes(5))).orElseThrow();
            assertEquals(2, closing.heldCount());
        }
        SimpleLock t = a.lock(config("closing-ticket", Duration.ofSeconds(60))).orElseThrow();
        SimpleLock s = a.lock(config("closing-semaphore", Duration.ofMinutes(5))).orElseThrow();
        t.unlock();
        s.unlock();
    }
}
