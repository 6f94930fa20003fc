package io.ticketing.spring.retry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.ticketing.jdbc.PgServer;
import java.net.ConnectException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Import;
import org.springframework.dao.CannotAcquireLockException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.annotation.Transactional;

/**
 * A committed transaction is never run again: for every combination of a
 * checked or unchecked exception, the method's rollback rules (Spring's
 * defaults, {@code rollbackFor}, {@code noRollbackFor}) and a retryable or
 * non-retryable class, the rows committed in a real PostgreSQL are counted
 * exactly. A serialization failure (SQLSTATE 40001) rolls back under every
 * rule, checked or not: the database has rolled the transaction back.
 * Also: settings belong to a bean's class, not to the method alone.
 */
@Timeout(120)
class CommittedTransactionsTest {
    static final int MAX_ATTEMPTS = 4;
    static PgServer pg;
    static String url;
    static ConfigurableApplicationContext ctx;

    @SpringBootConfiguration
    @EnableAutoConfiguration
    @Import({Writer.class, Twice.class, FiveTimes.class})
    static class App {}

    /** Inserts a row tagged with the case, then throws the given exception, under three sets of rollback rules. */
    public static class Writer {
        final JdbcTemplate jdbc;
        final AtomicInteger attempts = new AtomicInteger();

        public Writer(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        @Transactional
        public void defaultRules(String tag, Exception e) throws Exception {
            insertThenThrow(tag, e);
        }

        @Transactional(rollbackFor = Exception.class)
        public void rollbackForException(String tag, Exception e) throws Exception {
            insertThenThrow(tag, e);
        }

        @Transactional(noRollbackFor = Exception.class)
        public void noRollbackForException(String tag, Exception e) throws Exception {
            insertThenThrow(tag, e);
        }

        private void insertThenThrow(String tag, Exception e) throws Exception {
            attempts.incrementAndGet();
            jdbc.update("INSERT INTO rows_written (tag) VALUES (?)", tag);
            throw e;
        }
    }

    /** An inherited {@code @Transactional} method that always meets a conflict. */
    public abstract static class Conflicting {
        final AtomicInteger attempts = new AtomicInteger();

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        @Transactional
        public void conflict() {
            attempts.incrementAndGet();
            throw new CannotAcquireLockException("simulated conflict", new SQLException("could not serialize access", "40001"));
        }
    }

    @TicketingTransactional(maxAttempts = 2)
    public static class Twice extends Conflicting {}

    @TicketingTransactional(maxAttempts = 5)
    public static class FiveTimes extends Conflicting {}

    enum Rules { DEFAULTS, ROLLBACK_FOR_EXCEPTION, NO_ROLLBACK_FOR_EXCEPTION }

    static Stream<Arguments> combinations() {
        List<Arguments> l = new ArrayList<>();
        for (Rules rules : Rules.values()) {
            for (boolean checked : new boolean[] {true, false}) {
                for (boolean retryable : new boolean[] {true, false}) {
                    l.add(Arguments.of(rules, checked, retryable));
                }
            }
        }
        return l.stream();
    }

    static Exception exception(boolean checked, boolean retryable) {
        if (checked) {
            return retryable ? new SQLException("could not serialize access due to concurrent update", "40001")
                    : new java.io.IOException("a checked failure of no retryable class");
        }
        return retryable ? new CannotAcquireLockException("conflict", new SQLException("could not serialize access", "40001"))
                : new IllegalStateException("an unchecked failure of no retryable class");
    }

    /**
     * Whether the transaction rolls back: a serialization failure (every
     * retryable exception here carries SQLSTATE 40001) under any rules, as
     * the database has rolled it back already; otherwise Spring's rules (its
     * default: unchecked rolls back, checked commits).
     */
    static boolean rollsBack(Rules rules, boolean checked, boolean retryable) {
        if (retryable) {
            return true;
        }
        return switch (rules) {
            case DEFAULTS -> !checked;
            case ROLLBACK_FOR_EXCEPTION -> true;
            case NO_ROLLBACK_FOR_EXCEPTION -> false;
        };
    }

    @ParameterizedTest(name = "{0}, checked={1}, retryable={2}")
    @MethodSource("combinations")
    void onlyRolledBackTransactionsAreRetried(Rules rules, boolean checked, boolean retryable) {
        Writer w = ctx.getBean(Writer.class);
        Exception e = exception(checked, retryable);
        String tag = rules + "/" + checked + "/" + retryable;
        Exception thrown = assertThrows(Exception.class, () -> {
            switch (rules) {
                case DEFAULTS -> w.defaultRules(tag, e);
                case ROLLBACK_FOR_EXCEPTION -> w.rollbackForException(tag, e);
                case NO_ROLLBACK_FOR_EXCEPTION -> w.noRollbackForException(tag, e);
            }
        });
        assertSame(e, thrown, "the method's own exception reaches the caller");
        boolean rollsBack = rollsBack(rules, checked, retryable);
        assertEquals(rollsBack ? 0 : 1, committedRows(tag), "committed rows");
        assertEquals(rollsBack && retryable ? MAX_ATTEMPTS : 1, w.attempts().get(), "attempts");
    }

    @Test
    void aCheckedConnectExceptionUnderDefaultRulesCommitsOnceAndIsNotRetried() {
        Writer w = ctx.getBean(Writer.class);
        ConnectException e = new ConnectException("Connection refused");
        assertSame(e, assertThrows(ConnectException.class, () -> w.defaultRules("connect", e)));
        assertEquals(1, committedRows("connect"));
        assertEquals(1, w.attempts().get());
    }

    @Test
    void settingsBelongToTheBeanClassNotToTheInheritedMethod() {
        Twice two = ctx.getBean(Twice.class);
        FiveTimes five = ctx.getBean(FiveTimes.class);
        assertThrows(CannotAcquireLockException.class, two::conflict);
        assertThrows(CannotAcquireLockException.class, five::conflict);
        assertThrows(CannotAcquireLockException.class, two::conflict);
        assertEquals(2 * 2, two.attempts().get(), "the class with maxAttempts = 2");
        assertEquals(5, five.attempts().get(), "the class with maxAttempts = 5");
    }

    int committedRows(String tag) {
        try (Connection c = DriverManager.getConnection(url);
                var st = c.prepareStatement("SELECT count(*) FROM rows_written WHERE tag = ?")) {
            st.setString(1, tag);
            try (var rs = st.executeQuery()) {
                rs.next();
                return rs.getInt(1);
            }
        } catch (SQLException e) {
            throw new AssertionError(e);
        }
    }

    @BeforeAll
    static void start() throws Exception {
        pg = PgServer.start();
        url = pg.newDatabase();
        ctx = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", "spring.datasource.hikari.maximum-pool-size=2", "logging.level.root=OFF",
                        "spring.datasource.url=" + url,
                        "ticketing.transaction.retry.max-attempts=" + MAX_ATTEMPTS,
                        "ticketing.transaction.retry.fast-backoff-base-ms=1", "ticketing.transaction.retry.fast-cap-backoff-ms=2")
                .run();
    }

    @AfterAll
    static void stop() throws Exception {
        if (ctx != null) {
            ctx.close();
        }
        if (pg != null) {
            pg.close();
        }
    }

    @BeforeEach
    void table() throws Exception {
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement()) {
            st.execute("DROP TABLE IF EXISTS rows_written");
            st.execute("CREATE TABLE rows_written (tag text NOT NULL)");
        }
        ctx.getBean(Writer.class).attempts().set(0);
        ctx.getBean(Twice.class).attempts().set(0);
        ctx.getBean(FiveTimes.class).attempts().set(0);
    }
}
