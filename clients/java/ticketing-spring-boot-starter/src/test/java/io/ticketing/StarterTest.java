package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.spring.boot.TicketingAutoConfiguration;
import java.time.Duration;
import java.util.concurrent.Executor;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.actuate.health.HealthIndicator;
import org.springframework.boot.actuate.health.Status;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/** The starter in a real Spring Boot context against a real ticketd. */
@Timeout(120)
class StarterTest {
    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class App {}

    static ConfigurableApplicationContext app(String... props) {
        return new SpringApplicationBuilder(App.class).web(WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", "logging.level.root=OFF").properties(props).run();
    }

    static void eventually(String what, java.util.function.BooleanSupplier c) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!c.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "timed out waiting until " + what);
            Thread.sleep(10);
        }
    }

    @Test
    void aBrokerBeanFromPropertiesWithHealthAndTheApplicationsExecutor() throws Exception {
        TicketBroker broker;
        try (AutoCloseable cluster = TicketdAccess.start(1, "-client-token", "s3cret")) {
            try (ConfigurableApplicationContext ctx = app("ticketing.addrs=" + TicketdAccess.addrs(cluster), "ticketing.token=s3cret")) {
                broker = ctx.getBean(TicketBroker.class);
                broker.waitReadyBlocking(Duration.ofSeconds(30));
                try (Ticket t = broker.acquireBlocking("starter", Duration.ofSeconds(5), Duration.ofSeconds(30), Duration.ofSeconds(2))) {
                    assertTrue(t.getToken() > 0);
                }
                assertSame(ctx.getBean(TicketingAutoConfiguration.APPLICATION_TASK_EXECUTOR, Executor.class), broker.cfg.executor,
                        "background releases do not run on the application's task executor");
                HealthIndicator h = ctx.getBean("ticketingHealthIndicator", HealthIndicator.class);
                assertEquals(Status.UP, h.health().getStatus());
                cluster.close(); // the server goes away
                eventually("the health indicator reports DOWN", () -> h.health().getStatus().equals(Status.DOWN));
                assertTrue(h.health().getDetails().containsKey("reason"));
            }
            // closed with the context
            assertThrows(ClosedException.class, () -> broker.acquireBlocking("k", Duration.ZERO, Duration.ofSeconds(1), Duration.ZERO));
        }
    }

    @Test
    void noAddressesNoBroker() {
        try (ConfigurableApplicationContext ctx = app()) {
            assertFalse(ctx.getBeanNamesForType(TicketBroker.class).length > 0);
        }
    }

    @Test
    void aBadTlsModeStopsTheApplication() {
        Exception e = assertThrows(Exception.class, () -> app("ticketing.addrs=127.0.0.1:1", "ticketing.tls.mode=sometimes").close());
        Throwable t = e;
        while (t.getCause() != null && !(t instanceof IllegalArgumentException)) {
            t = t.getCause();
        }
        assertTrue(t.getMessage().contains("ticketing.tls.mode"), e.toString());
    }
}
