package io.ticketing.jdbc;

import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Objects;

/**
 * Makes database writes safe against Ticketing ticket holders that outlived
 * their lease, with the same SQL and guarantees as the Go package
 * {@code github.com/ticketing-io/ticketing/fence}.
 *
 * <p>A holder can pause (GC, swap, a partition) past its lease while another
 * client acquires the key with a higher token; when the first resumes, it
 * still believes it holds the ticket. The token protects the data only if the
 * database refuses writes with a token lower than one it has already seen, in
 * the same transaction as the write. {@link #check} keeps one row per fenced
 * key holding the highest token seen (the mark), and inside the caller's
 * transaction either raises the mark or throws {@link StaleTokenException}.
 * The mark, the check and the business write commit or roll back together.
 *
 * <pre>{@code
 * JdbcFence fence = new JdbcFence(JdbcFence.Dialect.POSTGRES);
 * fence.createTable(connection); // once, at setup
 *
 * Ticket t = broker.acquireBlocking("account/42", wait, lease, budget);
 * try {
 *     connection.setAutoCommit(false);
 *     fence.check(connection, "account/42", t.getToken()); // StaleTokenException: we lost the ticket
 *     // read what the write depends on here, after check, in the same transaction
 *     update.executeUpdate();
 *     connection.commit();
 * } catch (SQLException e) {
 *     connection.rollback();
 *     throw e;
 * } finally {
 *     t.releaseBlocking(); // after the commit
 * }
 * }</pre>
 *
 * <p>The fence orders writes by token; it cannot vouch for data read before
 * {@code check}: read every value the write depends on inside the fenced
 * transaction, after the check.
 *
 * <p>Two transactions checking the same key with the same token can never
 * both succeed. PostgreSQL: one {@code INSERT ... ON CONFLICT DO UPDATE ...
 * WHERE mark < token}; the second transaction waits for the first's row lock,
 * then (READ COMMITTED) changes nothing or (REPEATABLE READ, SERIALIZABLE)
 * fails with SQLSTATE 40001. MySQL/MariaDB (InnoDB): an {@code INSERT ... ON
 * DUPLICATE KEY UPDATE} that creates the row and takes its exclusive lock, then
 * a conditional {@code UPDATE}; keys are {@code VARBINARY(767)}, compared byte
 * for byte. SQLite: the PostgreSQL upsert; use a busy timeout. Tokens are
 * stored in a signed 64-bit column. Safe for concurrent use: it holds no
 * connection.
 */
public final class JdbcFence {
    /** The fence table's name unless another is given. */
    public static final String DEFAULT_TABLE = "ticketing_fence";
    static final int MAX_MYSQL_KEY = 767;

    /** The SQL dialect a fence speaks. */
    public enum Dialect {
        /** PostgreSQL. */
        POSTGRES,
        /** MySQL and MariaDB with InnoDB. */
        MYSQL,
        /** SQLite 3.24 or later (upsert). */
        SQLITE
    }

    private final Dialect dialect;
    private final String table;
    private final String create;
    private final String[] claim; // run in order; the last one's row count says whether the token won
    private final String mark; // reads the stored mark when the token lost

    /**
     * A fence on {@link #DEFAULT_TABLE}. It throws nothing checked, so it can
     * initialize a field.
     *
     * @param dialect the database's SQL dialect
     */
    public JdbcFence(Dialect dialect) {
        this(dialect, new TableName(DEFAULT_TABLE));
    }

    /**
     * A fence on the given table ("name" or "schema.name", identifiers only).
     *
     * @param dialect the database's SQL dialect
     * @param table the fence table's name
     * @throws InvalidFenceArgumentException the name is not an identifier
     */
    public JdbcFence(Dialect dialect, String table) throws InvalidFenceArgumentException {
        this(dialect, TableName.checked(table));
    }

    /** A table name already known to be one or two identifiers. */
    private record TableName(String name) {
        static TableName checked(String table) throws InvalidFenceArgumentException {
            if (!validTable(table)) {
                throw new InvalidFenceArgumentException("table name \"" + table + "\" is not an identifier");
            }
            return new TableName(table);
        }
    }

    private JdbcFence(Dialect dialect, TableName tableName) {
        this.dialect = Objects.requireNonNull(dialect);
        this.table = tableName.name();
        String t = table;
        switch (dialect) {
            case POSTGRES -> {
                create = "CREATE TABLE IF NOT EXISTS " + t + " (fence_key text PRIMARY KEY, token bigint NOT NULL)";
                claim = new String[] {"INSERT INTO " + t + " AS f (fence_key, token) VALUES (?, ?)\n"
                        + "ON CONFLICT (fence_key) DO UPDATE SET token = EXCLUDED.token WHERE f.token < EXCLUDED.token"};
                mark = "SELECT token FROM " + t + " WHERE fence_key = ?";
            }
            case SQLITE -> {
                create = "CREATE TABLE IF NOT EXISTS " + t + " (fence_key TEXT NOT NULL PRIMARY KEY, token INTEGER NOT NULL) WITHOUT ROWID";
                claim = new String[] {"INSERT INTO " + t + " (fence_key, token) VALUES (?, ?)\n"
                        + "ON CONFLICT (fence_key) DO UPDATE SET token = excluded.token WHERE token < excluded.token"};
                mark = "SELECT token FROM " + t + " WHERE fence_key = ?";
            }
            case MYSQL -> {
                create = "CREATE TABLE IF NOT EXISTS " + t + " (fence_key VARBINARY(767) NOT NULL PRIMARY KEY, token BIGINT NOT NULL) ENGINE=InnoDB";
                claim = new String[] {
                    "INSERT INTO " + t + " (fence_key, token) VALUES (?, -1) ON DUPLICATE KEY UPDATE token = token",
                    "UPDATE " + t + " SET token = ? WHERE fence_key = ? AND token < ?"};
                mark = "SELECT token FROM " + t + " WHERE fence_key = ? FOR UPDATE";
            }
            default -> throw new IllegalStateException();
        }
    }

    /**
     * The dialect.
     *
     * @return the SQL dialect
     */
    public Dialect dialect() {
        return dialect;
    }

    /**
     * The table.
     *
     * @return the fence table's name
     */
    public String table() {
        return table;
    }

    /**
     * Creates the fence table if it does not exist.
     *
     * @param c a connection to the database
     * @throws SQLException from the database
     */
    public void createTable(Connection c) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute(create);
        }
    }

    /**
     * Fences key with token inside the connection's current transaction. If
     * token is above the key's stored mark, or the key has none, it stores
     * token as the new mark and returns: the caller's writes in the
     * transaction are then safe to commit. Otherwise it changes nothing and
     * throws {@link StaleTokenException} (a newer holder committed) or
     * {@link TokenCommittedException} (this token already committed here); the
     * caller must roll back. Other SQLExceptions come from the database, and
     * the caller must roll back then too.
     *
     * <p>The mark is raised in the transaction, so it commits or rolls back
     * with the caller's writes, and the key's row stays locked until then: a
     * concurrent check of the same key waits and then compares against the
     * outcome.
     *
     * @param token the ticket's token ({@code Ticket.getToken()}); 1 .. 2^63-1
     * @param c the connection, inside the caller's transaction (not in auto-commit mode)
     * @param key the fenced key (the ticket's key, or any name of the protected resource)
     * @throws SQLException {@link StaleTokenException}, {@link TokenCommittedException}, {@link InvalidFenceArgumentException}, or the database's own
     */
    public void check(Connection c, String key, long token) throws SQLException {
        if (key == null || key.isEmpty()) {
            throw new InvalidFenceArgumentException("empty key");
        }
        byte[] kb = key.getBytes(StandardCharsets.UTF_8);
        if (dialect == Dialect.MYSQL && kb.length > MAX_MYSQL_KEY) {
            throw new InvalidFenceArgumentException("key of " + kb.length + " bytes is longer than " + MAX_MYSQL_KEY);
        }
        if (token < 0) {
            throw new InvalidFenceArgumentException("token " + Long.toUnsignedString(token) + " for key \"" + key
                    + "\" does not fit a signed 64-bit column (maximum " + Long.MAX_VALUE + ")");
        }
        if (c.getAutoCommit()) {
            throw new InvalidFenceArgumentException("the connection is in auto-commit mode: the check must run in the same transaction as the "
                    + "protected write (call setAutoCommit(false) first)");
        }
        int won = 0;
        for (int i = 0; i < claim.length; i++) {
            try (PreparedStatement ps = c.prepareStatement(claim[i])) {
                if (dialect == Dialect.MYSQL) {
                    if (i == 0) {
                        ps.setBytes(1, kb);
                    } else {
                        ps.setLong(1, token);
                        ps.setBytes(2, kb);
                        ps.setLong(3, token);
                    }
                } else {
                    ps.setString(1, key);
                    ps.setLong(2, token);
                }
                won = ps.executeUpdate();
            }
        }
        if (won == 1) {
            return;
        }
        long stored;
        try (PreparedStatement ps = c.prepareStatement(mark)) {
            if (dialect == Dialect.MYSQL) {
                ps.setBytes(1, kb);
            } else {
                ps.setString(1, key);
            }
            try (ResultSet rs = ps.executeQuery()) {
                stored = rs.next() ? rs.getLong(1) : -1;
            }
        }
        if (stored == token) {
            throw new TokenCommittedException(key, token);
        }
        throw new StaleTokenException(key, token, stored);
    }

    static boolean validTable(String name) {
        if (name == null) {
            return false;
        }
        String[] parts = name.split("\\.", -1);
        if (parts.length > 2) {
            return false;
        }
        for (String p : parts) {
            if (!validIdent(p)) {
                return false;
            }
        }
        return true;
    }

    private static boolean validIdent(String s) {
        if (s.isEmpty() || s.length() > 63) {
            return false;
        }
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            boolean ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9' && i > 0);
            if (!ok) {
                return false;
            }
        }
        return true;
    }
}
