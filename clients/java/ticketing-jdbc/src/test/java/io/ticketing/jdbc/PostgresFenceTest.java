package io.ticketing.jdbc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.NotHeldException;
import io.ticketing.Ticket;
import io.ticketing.TicketBroker;
import io.ticketing.TicketdAccess;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** The JDBC fence on a real PostgreSQL 15 started by the test. */
class PostgresFenceTest extends RealDatabaseFenceTest {
    PostgresFenceTest() {
        super(JdbcFence.Dialect.POSTGRES, PgServer::start);
    }

    @Override
    void createTables(Connection c) throws SQLException {
        try (Statement st = c.createStatement()) {
            fence.createTable(c); // idempotent
            st.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)");
            st.execute("INSERT INTO accounts VALUES (1, 100)");
        }
    }

    int balance() throws SQLException {
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("SELECT balance FROM accounts WHERE id = 1")) {
            rs.next();
            return rs.getInt(1);
        }
    }

    /** A fenced write of the balance. */
    void fencedWrite(String key, long token, int newBalance) throws SQLException {
        fenced(key, token, c -> {
            try (PreparedStatement ps = c.prepareStatement("UPDATE accounts SET balance = ? WHERE id = 1")) {
                ps.setInt(1, newBalance);
                ps.executeUpdate();
            }
        });
    }

    /**
     * The paused holder: A holds the ticket, stalls past its lease, B gets the
     * key with a higher token and commits a fenced write; when A resumes, its
     * fenced write is refused and rolled back.
     */
    @Test
    void aPausedHolderIsFencedOut() throws Exception {
        try (AutoCloseable cluster = TicketdAccess.start(1); TicketBroker broker = TicketBroker.connect(TicketdAccess.addrs(cluster))) {
            broker.waitReadyBlocking(Duration.ofSeconds(30));
            Ticket a = broker.acquireBlocking("account/1", Duration.ZERO, Duration.ofSeconds(1), Duration.ZERO);
            // A "pauses" here. B waits in the key's queue and gets it once A's lease has ended.
            Ticket b = broker.acquireBlocking("account/1", Duration.ofSeconds(30), Duration.ofSeconds(30), Duration.ZERO);
            assertTrue(b.getToken() > a.getToken());
            fencedWrite("account/1", b.getToken(), 200);
            b.releaseBlocking();
            // A resumes, still believing it holds the ticket.
            StaleTokenException e = assertThrows(StaleTokenException.class, () -> fencedWrite("account/1", a.getToken(), 999));
            assertEquals(b.getToken(), e.mark());
            assertEquals(a.getToken(), e.token());
            assertEquals(200, balance(), "the stale holder's write was committed");
            assertThrows(NotHeldException.class, a::releaseBlocking);
        }
    }

    @Test
    void higherTokensWinLowerAreStaleAndTheSameIsCommitted() throws Exception {
        fencedWrite("k", 5, 1);
        fencedWrite("k", 7, 2);
        assertThrows(StaleTokenException.class, () -> fencedWrite("k", 6, 3));
        TokenCommittedException tc = assertThrows(TokenCommittedException.class, () -> fencedWrite("k", 7, 4));
        assertEquals(7, tc.token());
        assertEquals(2, balance());
        fencedWrite("other", 1, 5); // keys are independent
        assertEquals(5, balance());
    }

    @Test
    void aRolledBackCheckLeavesTheMark() throws Exception {
        fencedWrite("k", 5, 1);
        try (Connection c = tx()) {
            fence.check(c, "k", 9);
            c.rollback();
        }
        fencedWrite("k", 6, 2); // 9 was never committed
        assertEquals(2, balance());
    }

    /** Two transactions with the same token, interleaved: never both succeed. */
    @Test
    void theSameTokenTwiceNeverBothSucceed() throws Exception {
        try (Connection c1 = tx(); Connection c2 = tx()) {
            secondCheckOfTheSameTokenWaitsAndLoses(c1, c2, 5, new LockWait() {
                @Override
                public boolean waiting(Statement st) throws SQLException {
                    return single(st, "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'") == 1;
                }

                @Override
                public String state(Statement st) throws SQLException {
                    return rows(st, "SELECT pid, state, wait_event_type, query FROM pg_stat_activity WHERE datname = current_database()");
                }
            });
        }
        // Under REPEATABLE READ the loser fails with a serialization error instead.
        try (Connection c1 = tx(); Connection c2 = tx()) {
            c2.setTransactionIsolation(Connection.TRANSACTION_REPEATABLE_READ);
            try (Statement st = c2.createStatement()) {
                st.executeQuery("SELECT 1").close(); // take the snapshot now
            }
            fence.check(c1, "k", 8);
            c1.commit();
            SQLException e = assertThrows(SQLException.class, () -> fence.check(c2, "k", 8));
            assertTrue(e instanceof TokenCommittedException || "40001".equals(e.getSQLState()), e.toString());
            c2.rollback();
        }
    }

    @Test
    void invalidArgumentsAreRefused() throws Exception {
        assertThrows(InvalidFenceArgumentException.class, () -> new JdbcFence(JdbcFence.Dialect.POSTGRES, "x; drop table y"));
        assertThrows(InvalidFenceArgumentException.class, () -> new JdbcFence(JdbcFence.Dialect.POSTGRES, "a.b.c"));
        new JdbcFence(JdbcFence.Dialect.POSTGRES, "public.my_fence");
        try (Connection c = tx()) {
            assertThrows(InvalidFenceArgumentException.class, () -> fence.check(c, "", 1));
            assertThrows(InvalidFenceArgumentException.class, () -> fence.check(c, "k", -1)); // 2^64-1 as unsigned
            c.rollback();
        }
        try (Connection c = DriverManager.getConnection(url)) {
            assertThrows(InvalidFenceArgumentException.class, () -> fence.check(c, "k", 1), "auto-commit must be refused");
        }
    }
}
