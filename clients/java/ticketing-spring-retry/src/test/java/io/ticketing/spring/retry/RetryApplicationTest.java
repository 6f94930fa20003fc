package io.ticketing.spring.retry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.jdbc.PgServer;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import ch.qos.logback.classic.Level;
import ch.qos.logback.classic.Logger;
import ch.qos.logback.classic.spi.ILoggingEvent;
import ch.qos.logback.core.read.ListAppender;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import org.slf4j.LoggerFactory;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Import;
import org.springframework.dao.CannotAcquireLockException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.transaction.TransactionSystemException;
import org.springframework.transaction.annotation.Isolation;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.transaction.interceptor.TransactionInterceptor;

/**
 * The retry module in a real Spring Boot application context (auto-configured
 * DataSource, JdbcTemplate and transaction manager) against a real
 * PostgreSQL, reached through a proxy that can cut a connection after COMMIT.
 */
@Timeout(120)
class RetryApplicationTest {
    static PgServer pg;
    static CutProxy proxy;
    static String url;
    static ConfigurableApplicationContext ctx;

    @SpringBootConfiguration
    @EnableAutoConfiguration
    @Import({Accounts.class, Outer.class, Inner.class})
    static class App {
        /** A registry, as Actuator would give one: the module counts retries into it. */
        @org.springframework.context.annotation.Bean
        SimpleMeterRegistry meterRegistry() {
            return new SimpleMeterRegistry();
        }
    }

    static ListAppender<ILoggingEvent> logs;

    /** Captures the interceptor's log (after the context started: Boot resets the logging system then). */
    static void captureLogs() {
        Logger l = (Logger) LoggerFactory.getLogger(RetryingTransactionInterceptor.class);
        l.setLevel(Level.DEBUG);
        l.setAdditive(false); // captured, not printed
        if (logs != null) {
            l.detachAppender(logs);
        }
        logs = new ListAppender<>();
        logs.start();
        l.addAppender(logs);
    }

    static List<String> logged(Level level) {
        return logs.list.stream().filter(e -> e.getLevel() == level).map(ILoggingEvent::getFormattedMessage).toList();
    }

    double counted(String name, String... tags) {
        Counter c = ctx.getBean(MeterRegistry.class).find(name).tags(tags).counter();
        return c == null ? 0 : c.count();
    }

    /** Transactional methods whose attempts are counted. */
    public static class Accounts {
        final JdbcTemplate jdbc;
        final AtomicInteger attempts = new AtomicInteger();

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        public Accounts(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        /** Meets a real serialization failure (40001) on its first attempt. */
        @Transactional(isolation = Isolation.REPEATABLE_READ)
        public void addTen() throws SQLException {
            int n = attempts.incrementAndGet();
            jdbc.update("INSERT INTO audit (what) VALUES ('addTen')");
            jdbc.queryForObject("SELECT balance FROM accounts WHERE id = 1", Integer.class); // the snapshot
            if (n == 1) {
                try (Connection other = DriverManager.getConnection(url); Statement st = other.createStatement()) {
                    st.executeUpdate("UPDATE accounts SET balance = balance + 1 WHERE id = 1"); // commits at once
                }
            }
            jdbc.update("UPDATE accounts SET balance = balance + 10 WHERE id = 1");
        }

        /** Always conflicts: a serialization failure every time. */
        @TicketingTransactional(maxAttempts = 3)
        public void alwaysConflicts() {
            attempts.incrementAndGet();
            jdbc.update("INSERT INTO audit (what) VALUES ('conflict')");
            throw new CannotAcquireLockException("simulated conflict", new SQLException("could not serialize access", "40001"));
        }

        @TicketingTransactional(maxAttempts = 1)
        public void once() {
            alwaysConflictsBody();
        }

        @TicketingTransactional(enabled = false)
        public void disabled() {
            alwaysConflictsBody();
        }

        @TicketingTransactional(fastBackoffBaseMs = -1)
        public void badSettings() {
            attempts.incrementAndGet();
        }

        @Transactional
        public void notRetryable() {
            attempts.incrementAndGet();
            throw new IllegalStateException("a bug, not a transient failure");
        }

        private void alwaysConflictsBody() {
            attempts.incrementAndGet();
            throw new CannotAcquireLockException("simulated conflict", new SQLException("could not serialize access", "40001"));
        }

        /** Not idempotent: its commit reply is lost on the first attempt. */
        @Transactional
        public void insertItem(int id) {
            attempts.incrementAndGet();
            jdbc.update("INSERT INTO items (id) VALUES (?)", id);
        }

        /** Idempotent: safe to run again when its commit reply is lost. */
        @TicketingTransactional(idempotent = true)
        public void upsertItem(int id) {
            attempts.incrementAndGet();
            jdbc.update("INSERT INTO items (id) VALUES (?) ON CONFLICT DO NOTHING", id);
        }
    }

    /** The outermost transaction; calls Inner, which joins it. */
    public static class Outer {
        final JdbcTemplate jdbc;
        final Inner inner;
        final AtomicInteger attempts = new AtomicInteger();

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        public Outer(JdbcTemplate jdbc, Inner inner) {
            this.jdbc = jdbc;
            this.inner = inner;
        }

        @Transactional
        public void run() {
            attempts.incrementAndGet();
            jdbc.update("INSERT INTO audit (what) VALUES ('outer')");
            inner.step();
        }
    }

    /** Joins the caller's transaction (REQUIRED); fails on its first call. */
    public static class Inner {
        final JdbcTemplate jdbc;
        final AtomicInteger attempts = new AtomicInteger();

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        public Inner(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        @TicketingTransactional(maxAttempts = 5)
        public void step() {
            int n = attempts.incrementAndGet();
            jdbc.update("INSERT INTO audit (what) VALUES ('inner')");
            if (n == 1) {
                throw new CannotAcquireLockException("simulated conflict", new SQLException("deadlock detected", "40P01"));
            }
        }
    }

    @BeforeAll
    static void start() throws Exception {
        pg = PgServer.start();
        String direct = pg.newDatabase();
        String db = direct.substring(direct.lastIndexOf('/') + 1, direct.indexOf('?'));
        proxy = new CutProxy(pg.port);
        url = direct;
        ctx = app("ticketing.transaction.retry.fast-backoff-base-ms=1", "ticketing.transaction.retry.fast-cap-backoff-ms=5",
                "spring.datasource.url=jdbc:postgresql://127.0.0.1:" + proxy.port() + "/" + db
                        // COMMIT as text on every commit (no server-side prepared statement), so the proxy sees it
                        + "?user=postgres&sslmode=disable&prepareThreshold=0");
        captureLogs();
    }

    static ConfigurableApplicationContext app(String... props) {
        return new SpringApplicationBuilder(App.class).web(org.springframework.boot.WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", "spring.datasource.hikari.maximum-pool-size=4", "logging.level.root=OFF")
                .properties(props).run();
    }

    @AfterAll
    static void stop() throws Exception {
        if (ctx != null) {
            ctx.close();
        }
        proxy.close();
        pg.close();
    }

    @BeforeEach
    void tables() throws Exception {
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement()) {
            st.execute("DROP TABLE IF EXISTS accounts, audit, items");
            st.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)");
            st.execute("INSERT INTO accounts VALUES (1, 100)");
            st.execute("CREATE TABLE audit (what text NOT NULL)");
            st.execute("CREATE TABLE items (id int PRIMARY KEY)");
        }
        ctx.getBean(Accounts.class).attempts().set(0);
        ctx.getBean(Outer.class).attempts().set(0);
        ctx.getBean(Inner.class).attempts().set(0);
        captureLogs(); // again: another context started by a test resets the logging system
    }

    int query(String sql) {
        return ctx.getBean(JdbcTemplate.class).queryForObject(sql, Integer.class);
    }

    @Test
    void theTransactionInterceptorIsReplaced() {
        assertInstanceOf(RetryingTransactionInterceptor.class, ctx.getBean("transactionInterceptor", TransactionInterceptor.class));
    }

    @Test
    void aRealSerializationFailureIsRetriedAsAWholeTransaction() throws Exception {
        Accounts a = ctx.getBean(Accounts.class);
        a.addTen();
        assertEquals(2, a.attempts().get(), "the conflict was not retried");
        assertEquals(111, query("SELECT balance FROM accounts WHERE id = 1"));
        assertEquals(1, query("SELECT count(*) FROM audit WHERE what = 'addTen'"), "the failed attempt was not rolled back");
        assertEquals(1, counted("ticketing.transaction.retries", "method", "Accounts.addTen", "class", "ABORTED", "attempt", "2"));
        List<String> debug = logged(Level.DEBUG);
        assertEquals(1, debug.size(), debug.toString());
        assertTrue(debug.get(0).startsWith("retrying Accounts.addTen (ABORTED, transaction rolled_back): attempt 2 of 10 in "), debug.get(0));
        assertEquals(List.of(), logged(Level.WARN));
    }

    @Test
    void maxAttemptsBoundsTheRetries() {
        Accounts a = ctx.getBean(Accounts.class);
        assertThrows(CannotAcquireLockException.class, a::alwaysConflicts);
        assertEquals(3, a.attempts().get());
        assertEquals(0, query("SELECT count(*) FROM audit"));
        assertEquals(1, counted("ticketing.transaction.retries.exhausted", "method", "Accounts.alwaysConflicts", "class", "ABORTED"));
        assertEquals(2, logged(Level.DEBUG).size(), logged(Level.DEBUG).toString());
        List<String> warn = logged(Level.WARN);
        assertEquals(1, warn.size(), warn.toString());
        assertTrue(warn.get(0).startsWith("Accounts.alwaysConflicts failed (ABORTED) on its last attempt, 3 of 3; giving up"), warn.get(0));
        a.attempts().set(0);
        assertThrows(CannotAcquireLockException.class, a::once);
        assertEquals(1, a.attempts().get());
        a.attempts().set(0);
        assertThrows(CannotAcquireLockException.class, a::disabled);
        assertEquals(1, a.attempts().get());
        a.attempts().set(0);
        assertThrows(IllegalStateException.class, a::notRetryable);
        assertEquals(1, a.attempts().get(), "a non-retryable failure was retried");
    }

    @Test
    void negativeLocalSettingsAreRejected() {
        Accounts a = ctx.getBean(Accounts.class);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, a::badSettings);
        assertTrue(e.getMessage().contains("fastBackoffBaseMs"), e.getMessage());
        assertEquals(0, a.attempts().get());
    }

    @Test
    void nestedRequiredMethodsAreRetriedOnlyAtTheOutermostBoundary() {
        Outer o = ctx.getBean(Outer.class);
        o.run();
        assertEquals(2, o.attempts().get(), "the outer transaction was not re-run");
        assertEquals(2, ctx.getBean(Inner.class).attempts().get(), "the inner method was retried on its own");
        assertEquals(1, query("SELECT count(*) FROM audit WHERE what = 'outer'"));
        assertEquals(1, query("SELECT count(*) FROM audit WHERE what = 'inner'"));
    }

    @Test
    void aCommitWhoseConnectionIsCutIsRetriedOnlyWhenIdempotent() {
        Accounts a = ctx.getBean(Accounts.class);
        proxy.arm();
        // Spring reports the commit's failure, or the failed rollback after it, both on the lost connection.
        TransactionSystemException e = assertThrows(TransactionSystemException.class, () -> a.insertItem(7));
        assertTrue(proxy.cut.get(), "the proxy did not cut the commit");
        assertEquals(1, a.attempts().get(), "a non-idempotent commit with an unknown outcome was retried");
        assertEquals(1, query("SELECT count(*) FROM items WHERE id = 7"), "the cut commit did commit");

        a.attempts().set(0);
        proxy.arm();
        a.upsertItem(8);
        assertTrue(proxy.cut.get(), "the proxy did not cut the commit");
        assertEquals(2, a.attempts().get(), "the idempotent method was not retried");
        assertEquals(1, query("SELECT count(*) FROM items WHERE id = 8"));
    }

    @Test
    void globallyDisabledMeansNoRetries() throws Exception {
        try (ConfigurableApplicationContext off = app("ticketing.transaction.retry.enabled=false", "spring.datasource.url=" + url)) {
            Accounts a = off.getBean(Accounts.class);
            assertThrows(CannotAcquireLockException.class, a::alwaysConflicts);
            assertEquals(1, a.attempts().get());
        }
    }

    @Test
    void negativeGlobalSettingsStopTheApplication() {
        Exception e = assertThrows(Exception.class, () -> app("ticketing.transaction.retry.max-attempts=-1", "spring.datasource.url=" + url).close());
        Throwable t = e;
        while (t.getCause() != null && !(t instanceof IllegalArgumentException)) {
            t = t.getCause();
        }
        assertTrue(t.getMessage().contains("max-attempts"), e.toString());
    }
}
