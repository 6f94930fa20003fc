package io.ticketing.jdbc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The JDBC fence on SQLite (in-process, a database file per test). */
class SqliteFenceTest {
    @TempDir
    Path dir;
    String url;
    JdbcFence fence;

    @BeforeEach
    void setUp() throws Exception {
        url = "jdbc:sqlite:" + dir.resolve("fence.db") + "?busy_timeout=5000";
        fence = new JdbcFence(JdbcFence.Dialect.SQLITE, "my_fence");
        try (Connection c = DriverManager.getConnection(url)) {
            fence.createTable(c);
        }
    }

    @AfterEach
    void tearDown() throws Exception {
        Files.deleteIfExists(dir.resolve("fence.db"));
    }

    void fenced(String key, long token) throws SQLException {
        try (Connection c = DriverManager.getConnection(url)) {
            c.setAutoCommit(false);
            try {
                fence.check(c, key, token);
                c.commit();
            } catch (SQLException e) {
                c.rollback();
                throw e;
            }
        }
    }

    long mark(String key) throws SQLException {
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement();
                ResultSet rs = st.executeQuery("SELECT token FROM my_fence WHERE fence_key = '" + key + "'")) {
            return rs.next() ? rs.getLong(1) : -1;
        }
    }

    @Test
    void marksRiseAndStaleTokensAreRefused() throws Exception {
        fenced("k", 3);
        fenced("k", 10);
        StaleTokenException s = assertThrows(StaleTokenException.class, () -> fenced("k", 4));
        assertEquals(10, s.mark());
        assertThrows(TokenCommittedException.class, () -> fenced("k", 10));
        assertEquals(10, mark("k"));
        try (Connection c = DriverManager.getConnection(url)) {
            c.setAutoCommit(false);
            fence.check(c, "k", 20);
            c.rollback();
        }
        assertEquals(10, mark("k"), "a rolled-back check raised the mark");
        fenced("é/日本", Long.MAX_VALUE);
        assertTrue(mark("k") == 10);
    }
}
