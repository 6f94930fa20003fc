package io.ticketing.spring.retry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.ticketing.jdbc.JdbcFence;
import io.ticketing.jdbc.PgServer;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Import;
import org.springframework.dao.ConcurrencyFailureException;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.transaction.annotation.Isolation;
import org.springframework.transaction.annotation.Propagation;
import org.springframework.transaction.annotation.Transactional;

/**
 * Where the retry loops are and what a real PostgreSQL serialization failure
 * means, in a Spring Boot context with its own transaction manager: a
 * transaction started under a caller that runs without one (SUPPORTS,
 * NOT_SUPPORTED) is retried on its own; attempts an inner transaction used
 * up are not multiplied by the boundary around it; the README's raw-JDBC
 * fence snippet, whose serialization failure is a checked
 * {@code PSQLException}, loses nothing under a plain {@code @Transactional}.
 */
@Timeout(120)
class RetryBoundariesTest {
    static PgServer pg;
    static String url;
    static ConfigurableApplicationContext ctx;

    @SpringBootConfiguration
    @EnableAutoConfiguration
    @Import({Step.class, Callers.class, Payments.class})
    static class App {}

    /**
     * Makes this transaction's next update of account 1 a real serialization
     * failure (40001): under REPEATABLE READ, after this transaction took its
     * snapshot, another one changes the row and commits.
     */
    static void changeAccountBehindTheSnapshot() throws SQLException {
        try (Connection other = DriverManager.getConnection(url); Statement st = other.createStatement()) {
            st.executeUpdate("UPDATE accounts SET balance = balance + 1 WHERE id = 1"); // commits at once
        }
    }

    /** A transaction that meets a real serialization failure on its first attempt, or on every attempt. */
    public static class Step {
        final JdbcTemplate jdbc;
        final AtomicInteger attempts = new AtomicInteger();
        volatile boolean always;

        public Step(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        public void always(boolean v) {
            always = v;
        }

        @TicketingTransactional(isolation = Isolation.REPEATABLE_READ, maxAttempts = 3)
        public void addTen() throws SQLException {
            int n = attempts.incrementAndGet();
            jdbc.update("INSERT INTO audit (what) VALUES ('step')");
            jdbc.queryForObject("SELECT balance FROM accounts WHERE id = 1", Integer.class); // the snapshot
            if (n == 1 || always) {
                changeAccountBehindTheSnapshot();
            }
            jdbc.update("UPDATE accounts SET balance = balance + 10 WHERE id = 1"); // 40001 after a change
        }
    }

    /** Methods that call Step's transaction from outside any transaction of their own. */
    public static class Callers {
        final Step step;
        final JdbcTemplate jdbc;
        final AtomicInteger attempts = new AtomicInteger();

        public Callers(Step step, JdbcTemplate jdbc) {
            this.step = step;
            this.jdbc = jdbc;
        }

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        @Transactional(propagation = Propagation.SUPPORTS)
        public void supports() throws SQLException {
            attempts.incrementAndGet();
            step.addTen();
        }

        @Transactional(propagation = Propagation.NOT_SUPPORTED)
        public void notSupported() throws SQLException {
            attempts.incrementAndGet();
            step.addTen();
        }

        /** The outermost transaction, whose body suspends it (NOT_SUPPORTED) around Step's own transaction. */
        @Transactional
        public void outermost() throws SQLException {
            attempts.incrementAndGet();
            jdbc.update("INSERT INTO audit (what) VALUES ('outermost')");
            self.notSupported();
        }

        private Callers self; // the proxy, so that the inner call goes through the interceptor

        public void self(Callers proxy) {
            self = proxy;
        }
    }

    /**
     * The README's "JDBC fence in Spring" snippet: raw JDBC on the
     * transaction's connection, whose serialization failure is a checked
     * PSQLException; once under a plain {@code @Transactional} (whose default
     * rules commit on a checked exception), once under
     * {@code @TicketingTransactional} as the README shows it.
     */
    public static class Payments {
        private final DataSource dataSource;
        private final JdbcFence fence = new JdbcFence(JdbcFence.Dialect.POSTGRES);
        final AtomicInteger attempts = new AtomicInteger();

        public Payments(DataSource dataSource) {
            this.dataSource = dataSource;
        }

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        @Transactional(isolation = Isolation.REPEATABLE_READ)
        public void payPlain(long token) throws SQLException {
            pay(token);
        }

        @TicketingTransactional(isolation = Isolation.REPEATABLE_READ)
        public void payTicketing(long token) throws SQLException {
            pay(token);
        }

        private void pay(long token) throws SQLException {
            int n = attempts.incrementAndGet();
            Connection connection = DataSourceUtils.getConnection(dataSource); // the transaction's own; Spring closes it
            fence.check(connection, "account/1", token);
            long balance;
            try (PreparedStatement st = connection.prepareStatement("SELECT balance FROM accounts WHERE id = ?")) {
                st.setInt(1, 1);
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    balance = rs.getLong(1);
                }
            }
            if (n == 1) {
                changeAccountBehindTheSnapshot();
            }
            try (PreparedStatement st = connection.prepareStatement("UPDATE accounts SET balance = ? WHERE id = ?")) {
                st.setLong(1, balance + 10);
                st.setInt(2, 1);
                st.executeUpdate(); // a PSQLException, SQLSTATE 40001, on the first attempt
            }
        }
    }

    @BeforeAll
    static void start() throws Exception {
        pg = PgServer.start();
        url = pg.newDatabase();
        ctx = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", "spring.datasource.hikari.maximum-pool-size=4", "logging.level.root=OFF",
                        "spring.datasource.url=" + url,
                        "ticketing.transaction.retry.fast-backoff-base-ms=1", "ticketing.transaction.retry.fast-cap-backoff-ms=2")
                .run();
        ctx.getBean(Callers.class).self(ctx.getBean(Callers.class));
        try (Connection c = DriverManager.getConnection(url)) {
            new JdbcFence(JdbcFence.Dialect.POSTGRES).createTable(c);
        }
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
    void tables() throws Exception {
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement()) {
            st.execute("DROP TABLE IF EXISTS accounts, audit");
            st.execute("CREATE TABLE accounts (id int PRIMARY KEY, balance int NOT NULL)");
            st.execute("INSERT INTO accounts VALUES (1, 100)");
            st.execute("CREATE TABLE audit (what text NOT NULL)");
            st.execute("DELETE FROM ticketing_fence");
        }
        Step s = ctx.getBean(Step.class);
        s.attempts().set(0);
        s.always(false);
        ctx.getBean(Callers.class).attempts().set(0);
        ctx.getBean(Payments.class).attempts().set(0);
    }

    static long query(String sql) throws SQLException {
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    @Test
    void aTransactionCalledFromASupportsMethodIsRetriedOnItsOwn() throws Exception {
        Callers callers = ctx.getBean(Callers.class);
        callers.supports();
        assertEquals(1, callers.attempts().get(), "the caller ran again");
        assertEquals(2, ctx.getBean(Step.class).attempts().get(), "the inner transaction was not retried");
        assertEquals(1, query("SELECT count(*) FROM audit WHERE what = 'step'"));
        assertEquals(111, query("SELECT balance FROM accounts WHERE id = 1"));
    }

    @Test
    void aTransactionCalledFromANotSupportedMethodIsRetriedOnItsOwn() throws Exception {
        Callers callers = ctx.getBean(Callers.class);
        callers.notSupported();
        assertEquals(1, callers.attempts().get(), "the caller ran again");
        assertEquals(2, ctx.getBean(Step.class).attempts().get(), "the inner transaction was not retried");
        assertEquals(1, query("SELECT count(*) FROM audit WHERE what = 'step'"));
        assertEquals(111, query("SELECT balance FROM accounts WHERE id = 1"));
    }

    @Test
    void attemptsAnInnerTransactionUsedUpAreNotMultipliedByTheOneAroundIt() throws Exception {
        Callers callers = ctx.getBean(Callers.class);
        Step step = ctx.getBean(Step.class);
        step.always(true);
        assertThrows(ConcurrencyFailureException.class, callers::outermost);
        assertEquals(3, step.attempts().get(), "the inner transaction's maxAttempts");
        assertEquals(2, callers.attempts().get(), "the outermost transaction ran again (it counts itself and its NOT_SUPPORTED part)");
        assertEquals(0, query("SELECT count(*) FROM audit"), "a failed attempt committed");
    }

    @Test
    void theReadmesFenceSnippetUnderAPlainTransactionalIsRetriedNotLost() throws Exception {
        Payments p = ctx.getBean(Payments.class);
        p.payPlain(7);
        assertEquals(2, p.attempts().get(), "the serialization failure (a checked PSQLException) was not retried");
        assertEquals(111, query("SELECT balance FROM accounts WHERE id = 1"), "the payment was lost or applied twice");
        assertEquals(7, query("SELECT token FROM ticketing_fence WHERE fence_key = 'account/1'"), "the fence's mark was lost");
    }

    @Test
    void theReadmesFenceSnippetUnderTicketingTransactionalIsRetried() throws Exception {
        Payments p = ctx.getBean(Payments.class);
        p.payTicketing(8);
        assertEquals(2, p.attempts().get());
        assertEquals(111, query("SELECT balance FROM accounts WHERE id = 1"));
        assertEquals(8, query("SELECT token FROM ticketing_fence WHERE fence_key = 'account/1'"));
    }
}
