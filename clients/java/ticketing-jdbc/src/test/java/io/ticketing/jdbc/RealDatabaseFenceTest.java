package io.ticketing.jdbc;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
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
}
