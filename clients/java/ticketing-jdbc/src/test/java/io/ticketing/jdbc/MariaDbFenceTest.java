package io.ticketing.jdbc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** The JDBC fence on a real MariaDB (InnoDB) started by the test. */
class MariaDbFenceTest extends RealDatabaseFenceTest {
    MariaDbFenceTest() {
        super(JdbcFence.Dialect.MYSQL, MariaServer::start);
    }

    void fenced(String key, long token) throws SQLException {
        fenced(key, token, c -> {});
    }

    @Test
    void marksRiseAndStaleTokensAreRefused() throws Exception {
        fenced("k", 3);
        fenced("k", 10);
        assertEquals(10, assertThrows(StaleTokenException.class, () -> fenced("k", 4)).mark());
        assertThrows(TokenCommittedException.class, () -> fenced("k", 10));
        fenced("K", 1); // VARBINARY: byte for byte, case matters
        try (Connection c = tx()) {
            assertThrows(InvalidFenceArgumentException.class, () -> fence.check(c, "x".repeat(768), 1));
            c.rollback();
        }
    }

    @Test
    void theSameTokenTwiceNeverBothSucceed() throws Exception {
        // A thread of its own: the common pool may have no free thread on a
        // small machine, and then the second check would never start.
        ExecutorService exec = Executors.newSingleThreadExecutor();
        try (Connection c1 = tx(); Connection c2 = tx()) {
            long c2id;
            try (Statement st = c2.createStatement(); ResultSet rs = st.executeQuery("SELECT CONNECTION_ID()")) {
                rs.next();
                c2id = rs.getLong(1);
            }
            fence.check(c1, "k", 5);
            Future<Throwable> second = exec.submit(() -> {
                try {
                    fence.check(c2, "k", 5);
                    return null;
                } catch (SQLException e) {
                    return e;
                }
            });
            try (Connection mon = DriverManager.getConnection(url); Statement st = mon.createStatement()) {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (true) {
                    // c2's own transaction, waiting for the row c1 locked.
                    try (ResultSet rs = st.executeQuery("SELECT count(*) FROM information_schema.innodb_trx"
                            + " WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id = " + c2id)) {
                        rs.next();
                        if (rs.getInt(1) == 1) {
                            break;
                        }
                    }
                    if (second.isDone()) {
                        Throwable t = second.get();
                        throw new AssertionError("the second check ended without waiting for the first's lock: "
                                + (t == null ? "it succeeded" : t.toString()), t);
                    }
                    if (System.nanoTime() >= end) {
                        throw new AssertionError("the second check (connection " + c2id
                                + ") did not wait for the first's lock within 20 s; the server's transactions and threads: "
                                + rows(st, "SELECT trx_mysql_thread_id, trx_state, trx_query FROM information_schema.innodb_trx") + " "
                                + rows(st, "SELECT id, command, state, info FROM information_schema.processlist"));
                    }
                    Thread.sleep(10);
                }
            }
            c1.commit();
            assertInstanceOf(TokenCommittedException.class, second.get(20, TimeUnit.SECONDS));
            c2.rollback();
        } finally {
            exec.shutdownNow();
        }
    }

    /** The rows of a diagnostic query, for a failure message. */
    static String rows(Statement st, String query) throws SQLException {
        StringBuilder sb = new StringBuilder("[");
        try (ResultSet rs = st.executeQuery(query)) {
            int n = rs.getMetaData().getColumnCount();
            while (rs.next()) {
                sb.append('(');
                for (int i = 1; i <= n; i++) {
                    sb.append(i > 1 ? ", " : "").append(rs.getString(i));
                }
                sb.append(')');
            }
        }
        return sb.append(']').toString();
    }
}
