package io.ticketing.jdbc;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
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
        try (Connection c1 = tx(); Connection c2 = tx()) {
            long c2id;
            try (Statement st = c2.createStatement()) {
                c2id = single(st, "SELECT CONNECTION_ID()");
            }
            secondCheckOfTheSameTokenWaitsAndLoses(c1, c2, 5, new LockWait() {
                @Override
                public boolean waiting(Statement st) throws SQLException {
                    // c2's own transaction, waiting for the row c1 locked;
                    // or c2's fence statement still running on the server.
                    // MariaDB does not always list a transaction blocked in
                    // an INSERT's duplicate-key check in innodb_trx (seen
                    // once: the thread in state "Update" on the fence INSERT,
                    // no row for its transaction), and a statement that has
                    // started before c1 commits is what the check needs.
                    return single(st, "SELECT count(*) FROM information_schema.innodb_trx"
                            + " WHERE trx_state = 'LOCK WAIT' AND trx_mysql_thread_id = " + c2id) == 1
                            || single(st, "SELECT count(*) FROM information_schema.processlist WHERE id = " + c2id
                            + " AND command = 'Query' AND info LIKE 'INSERT INTO ticketing_fence%'") == 1;
                }

                @Override
                public String state(Statement st) throws SQLException {
                    return "connection " + c2id + "; transactions "
                            + rows(st, "SELECT trx_mysql_thread_id, trx_state, trx_query FROM information_schema.innodb_trx")
                            + "; threads " + rows(st, "SELECT id, command, state, info FROM information_schema.processlist");
                }
            });
        }
    }
}
