package io.ticketing.spring.retry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;

import io.ticketing.jdbc.PgServer;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceTransactionManager;
import org.springframework.jdbc.support.JdbcTransactionManager;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.annotation.Isolation;
import org.springframework.transaction.annotation.Transactional;

/**
 * A serialization failure at COMMIT under a plain
 * {@code DataSourceTransactionManager} (which reports it as a
 * {@code TransactionSystemException}, where Boot's
 * {@code JdbcTransactionManager} translates it and rolls back): PostgreSQL
 * rolled the transaction back, so it is retried like any other 40001.
 */
@Timeout(120)
class RetryDataSourceTransactionManagerTest {
    static PgServer pg;
    static String url;
    static ConfigurableApplicationContext ctx;

    @SpringBootConfiguration
    @EnableAutoConfiguration
    @Import(Classes.class)
    static class App {
        /** The plain manager, in place of the JdbcTransactionManager Boot would configure. */
        @Bean
        DataSourceTransactionManager transactionManager(DataSource ds) {
            return new DataSourceTransactionManager(ds);
        }
    }

    /**
     * Write skew under SERIALIZABLE: this transaction reads class 1 and writes
     * class 2; on the first attempt another one reads class 2, writes class 1
     * and commits first. PostgreSQL cancels this one as the pivot during its
     * commit attempt (SQLSTATE 40001).
     */
    public static class Classes {
        final JdbcTemplate jdbc;
        final AtomicInteger attempts = new AtomicInteger();

        public Classes(JdbcTemplate jdbc) {
            this.jdbc = jdbc;
        }

        /** The counter (through the proxy: fields of a class proxy are not the target's). */
        public AtomicInteger attempts() {
            return attempts;
        }

        @Transactional(isolation = Isolation.SERIALIZABLE)
        public void moveIntoClassTwo() throws SQLException {
            int n = attempts.incrementAndGet();
            jdbc.queryForObject("SELECT coalesce(sum(value), 0) FROM classes WHERE class = 1", Long.class);
            jdbc.update("INSERT INTO classes VALUES (2, 30)");
            if (n == 1) {
                try (Connection other = DriverManager.getConnection(url); Statement st = other.createStatement()) {
                    other.setAutoCommit(false);
                    st.execute("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE");
                    st.executeQuery("SELECT coalesce(sum(value), 0) FROM classes WHERE class = 2").close();
                    st.executeUpdate("INSERT INTO classes VALUES (1, 300)");
                    other.commit();
                }
            }
        }
    }

    @BeforeAll
    static void start() throws Exception {
        pg = PgServer.start();
        url = pg.newDatabase();
        ctx = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", "spring.datasource.hikari.maximum-pool-size=2", "logging.level.root=OFF",
                        "spring.datasource.url=" + url,
                        "ticketing.transaction.retry.fast-backoff-base-ms=1", "ticketing.transaction.retry.fast-cap-backoff-ms=2")
                .run();
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement()) {
            st.execute("CREATE TABLE classes (class int NOT NULL, value int NOT NULL)");
            st.execute("INSERT INTO classes VALUES (1, 10), (1, 20), (2, 100), (2, 200)");
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

    static long query(String sql) throws SQLException {
        try (Connection c = DriverManager.getConnection(url); Statement st = c.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    @Test
    void aSerializationFailureAtCommitIsRetried() throws Exception {
        PlatformTransactionManager tm = ctx.getBean(PlatformTransactionManager.class);
        assertInstanceOf(DataSourceTransactionManager.class, tm);
        assertEquals(false, tm instanceof JdbcTransactionManager, "the plain manager, not Boot's JdbcTransactionManager");
        Classes c = ctx.getBean(Classes.class);
        c.moveIntoClassTwo();
        assertEquals(2, c.attempts().get(), "the transaction PostgreSQL rolled back at COMMIT was not retried");
        assertEquals(1, query("SELECT count(*) FROM classes WHERE class = 2 AND value = 30"), "the write was lost or made twice");
        assertEquals(1, query("SELECT count(*) FROM classes WHERE class = 1 AND value = 300"));
    }
}
