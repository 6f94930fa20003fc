package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.ticketing.spring.retry.TicketingTransactional;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.transaction.PlatformTransactionManager;
import org.springframework.transaction.TransactionDefinition;
import org.springframework.transaction.support.AbstractPlatformTransactionManager;
import org.springframework.transaction.support.DefaultTransactionStatus;

/**
 * The retry module and Ticketing's own errors, from a real ticketd whose
 * held-tickets limit is 1: a capacity reject (OVERLOADED) is retried on the
 * slow tier, a plain "not acquired" never.
 */
@Timeout(120)
class RetryTicketingErrorsTest {
    @TempDir
    Path dir;

    /** Transactions without a database: only the retry boundary matters here. */
    static final class NoDatabase extends AbstractPlatformTransactionManager {
        @Override
        protected Object doGetTransaction() {
            return new Object();
        }

        @Override
        protected void doBegin(Object transaction, TransactionDefinition definition) {}

        @Override
        protected void doCommit(DefaultTransactionStatus status) {}

        @Override
        protected void doRollback(DefaultTransactionStatus status) {}
    }

    @SpringBootConfiguration
    @EnableAutoConfiguration
    // No JDBC here: on Spring Boot 4 transaction management is auto-configured only with
    // spring-boot-transaction (which spring-boot-jdbc brings), so the test enables it itself.
    @org.springframework.transaction.annotation.EnableTransactionManagement
    @Import(Work.class)
    static class App {
        @Bean
        PlatformTransactionManager transactionManager() {
            return new NoDatabase();
        }
    }

    /** Transactional work that needs a ticket. */
    public static class Work {
        final TicketBroker broker;
        final AtomicInteger attempts = new AtomicInteger();

        public Work(TicketBroker broker) {
            this.broker = broker;
        }

        public AtomicInteger attempts() {
            return attempts;
        }

        @TicketingTransactional(maxAttempts = 3, slowBackoffBaseMs = 1, slowCapBackoffMs = 2)
        public void withTicket(String key) {
            attempts.incrementAndGet();
            broker.acquireBlocking(key, Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO).close();
        }
    }

    @Test
    void capacityIsRetriedNotAcquiredIsNot() throws Exception {
        Path cfg = dir.resolve("ticketd.toml");
        Files.writeString(cfg, "[limits]\nmax_held = 1\n");
        try (AutoCloseable cluster = TicketdAccess.start(1, "-config", cfg.toString());
                ConfigurableApplicationContext ctx = new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                        .properties("spring.main.banner-mode=off", "logging.level.root=OFF", "ticketing.addrs=" + TicketdAccess.addrs(cluster))
                        .run()) {
            TicketBroker broker = ctx.getBean(TicketBroker.class);
            broker.waitReadyBlocking(Duration.ofSeconds(30));
            Ticket holder = broker.acquireBlocking("held", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO); // the server is full now
            Work w = ctx.getBean(Work.class);
            CapacityException e = assertThrows(CapacityException.class, () -> w.withTicket("other"));
            assertEquals(CapacityException.HELD, e.reason());
            assertEquals(3, w.attempts().get(), "a capacity reject was not retried up to maxAttempts");
            w.attempts().set(0);
            assertThrows(NotAcquiredException.class, () -> w.withTicket("held"));
            assertEquals(1, w.attempts().get(), "not acquired was retried");
            holder.releaseBlocking();
        }
    }
}
