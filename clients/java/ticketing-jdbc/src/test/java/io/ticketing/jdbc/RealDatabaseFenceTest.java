package io.ticketing.jdbc;

import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;

/**
 * What the fence's tests on a real database server share: one server for the
 * class, a fresh database with the fence's table for each test, and
 * transactions that check the fence and commit or roll back as an
 * application would.
 */
@Timeout(120)
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class RealDatabaseFenceTest {
    /** Starts a test class's database server. */
    interface Starter {
        DatabaseServer start() throws Exception;
    }

    private final JdbcFence.Dialect dialect;
    private final Starter starter;
    DatabaseServer server;
    String url;
    JdbcFence fence;

    RealDatabaseFenceTest(JdbcFence.Dialect dialect, Starter starter) {
        this.dialect = dialect;
        this.starter = starter;
    }

    /** Adds a test's own tables to a new database; none by default. */
    void createTables(Connection c) throws SQLException {}

    /** Work done inside a fenced transaction, after the check passed. */
    interface Work {
        void run(Connection c) throws SQLException;
    }

    @BeforeAll
    void startDb() throws Exception {
        server = starter.start();
    }

    @AfterAll
    void stopDb() throws Exception {
        server.close();
    }

    @BeforeEach
    void database() throws Exception {
        url = server.newDatabase();
        fence = new JdbcFence(dialect);
        try (Connection c = DriverManager.getConnection(url)) {
            fence.createTable(c);
            createTables(c);
        }
    }

    Connection tx() throws SQLException {
        Connection c = DriverManager.getConnection(url);
        c.setAutoCommit(false);
        return c;
    }

    /** A fenced transaction: check, then work, then commit; rolls back on any failure. */
    void fenced(String key, long token, Work work) throws SQLException {
        try (Connection c = tx()) {
            try {
                fence.check(c, key, token);
                work.run(c);
                c.commit();
            } catch (SQLException e) {
                c.rollback();
                throw e;
            }
        }
    }

    /** How a database shows, on a monitoring connection, that the second check waits for a row lock. */
    interface LockWait {
        boolean waiting(Statement monitor) throws SQLException;

        /** What the server was doing, for the message when it never waited. */
        String state(Statement monitor) throws SQLException;
    }

    /**
     * Two transactions check the same token on key k: the second must wait
     * for the first's row lock and, once the first commits, be refused as
     * already committed.
     */
    void secondCheckOfTheSameTokenWaitsAndLoses(Connection c1, Connection c2, long token, LockWait lockWait) throws Exception {
        // A thread of its own: the common pool may have no free thread on a
        // small machine, and then the second check would never start.
        ExecutorService exec = Executors.newSingleThreadExecutor();
        try {
            fence.check(c1, "k", token);
            Future<Throwable> second = exec.submit(() -> {
                try {
                    fence.check(c2, "k", token);
                    return null;
                } catch (SQLException e) {
                    return e;
                }
            });
            try (Connection mon = DriverManager.getConnection(url); Statement st = mon.createStatement()) {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (!lockWait.waiting(st)) {
                    if (second.isDone()) {
                        Throwable t = second.get();
                        throw new AssertionError("the second check ended without waiting for the first's lock: "
                                + (t == null ? "it succeeded" : t.toString()), t);
                    }
                    if (System.nanoTime() >= end) {
                        throw new AssertionError("the second check did not wait for the first's lock within 20 s; the server: "
                                + lockWait.state(st));
                    }
                    Thread.sleep(10); // polling the server's lock view; the wait itself is bounded above
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

    /** The one integer a query selects. */
    static long single(Statement st, String query) throws SQLException {
        try (ResultSet rs = st.executeQuery(query)) {
            rs.next();
            return rs.getLong(1);
        }
    }
}
