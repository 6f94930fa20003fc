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
abstract class RealDatabaseFenceTest<S extends AutoCloseable> {
    S server;
    String url;
    JdbcFence fence;

    /** Starts the class's database server. */
    abstract S startServer() throws Exception;

    /** A JDBC URL of a new, empty database on the server. */
    abstract String newDatabase(S server) throws SQLException;

    abstract JdbcFence.Dialect dialect();

    /** Adds a test's own tables to a new database; none by default. */
    void createTables(Connection c) throws SQLException {}

    /** Work done inside a fenced transaction, after the check passed. */
    interface Work {
        void run(Connection c) throws SQLException;
    }

    @BeforeAll
    void startDb() throws Exception {
        server = startServer();
    }

    @AfterAll
    void stopDb() throws Exception {
        server.close();
    }

    @BeforeEach
    void database() throws Exception {
        url = newDatabase(server);
        fence = new JdbcFence(dialect());
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
