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
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/** The starter in a real Spring Boot context against a real ticketd. */
@Timeout(120)
class StarterTest {
    @SpringBootConfiguration
    @EnableAutoConfiguration
    static class App {
        /** A registry, as Actuator would give one: the broker's meters go to it. */
        @org.springframework.context.annotation.Bean
        io.micrometer.core.instrument.simple.SimpleMeterRegistry meterRegistry() {
            return new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
        }
    }

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

    /**
     * The health API of the Spring Boot the tests run on: Boot 4 moved it from
     * Actuator (org.springframework.boot.actuate.health) to spring-boot-health.
     */
    static final String HEALTH_API = org.springframework.boot.SpringBootVersion.getVersion().startsWith("3.")
            ? "org.springframework.boot.actuate.health.HealthIndicator"
            : "org.springframework.boot.health.contributor.HealthIndicator";

    /** The indicator's current status, through whichever health API this Spring Boot has. */
    static String status(Object indicator) {
        try {
            Object health = indicator.getClass().getMethod("health").invoke(indicator);
            return health.getClass().getMethod("getStatus").invoke(health).toString();
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
        }
    }

    static java.util.Map<?, ?> details(Object indicator) {
        try {
            Object health = indicator.getClass().getMethod("health").invoke(indicator);
            return (java.util.Map<?, ?>) health.getClass().getMethod("getDetails").invoke(health);
        } catch (ReflectiveOperationException e) {
            throw new AssertionError(e);
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
                io.micrometer.core.instrument.MeterRegistry meters = ctx.getBean(io.micrometer.core.instrument.MeterRegistry.class);
                assertEquals(1, meters.get("ticketing.acquire").tag("outcome", "granted").timer().count());
                eventually("the background release is counted", () -> {
                    var c = meters.find("ticketing.background.releases").tag("outcome", "released").counter();
                    return c != null && c.count() == 1;
                });
                assertSame(ctx.getBean(TicketingAutoConfiguration.APPLICATION_TASK_EXECUTOR, Executor.class), broker.cfg.executor,
                        "background releases do not run on the application's task executor");
                Object h = ctx.getBean("ticketingHealthIndicator");
                assertEquals(HEALTH_API, h.getClass().getInterfaces()[0].getName(), "the indicator of this Spring Boot's health API");
                assertEquals("UP", status(h));
                cluster.close(); // the server goes away
                eventually("the health indicator reports DOWN", () -> status(h).equals("DOWN"));
                assertTrue(details(h).containsKey("reason"));
            }
            // closed with the context
            assertThrows(ClosedException.class, () -> broker.acquireBlocking("k", Duration.ZERO, Duration.ofSeconds(1), Duration.ZERO));
        }
    }

    /**
     * Every broker meter, each outcome of the tagged ones, exists at zero as
     * soon as the application has started: before any session, acquire or
     * release (nothing listens at the address).
     */
    @Test
    void theBrokersMetersExistBeforeAnyEvent() {
        try (ConfigurableApplicationContext ctx = app("ticketing.addrs=127.0.0.1:1")) {
            io.micrometer.core.instrument.MeterRegistry meters = ctx.getBean(io.micrometer.core.instrument.MeterRegistry.class);
            for (String outcome : BrokerListener.ACQUIRE_OUTCOMES) {
                var t = meters.find("ticketing.acquire").tag("outcome", outcome).timer();
                assertTrue(t != null, "ticketing.acquire{outcome=" + outcome + "} is missing: " + names(meters));
                assertEquals(0, t.count());
            }
            for (String name : new String[] {"ticketing.reconnects", "ticketing.leader.changes"}) {
                var c = meters.find(name).counter();
                assertTrue(c != null, name + " is missing: " + names(meters));
                assertEquals(0, c.count());
            }
            for (String outcome : io.ticketing.spring.boot.MicrometerBrokerListener.RELEASE_OUTCOMES) {
                var c = meters.find("ticketing.background.releases").tag("outcome", outcome).counter();
                assertTrue(c != null, "ticketing.background.releases{outcome=" + outcome + "} is missing: " + names(meters));
                assertEquals(0, c.count());
            }
        }
    }

    static java.util.List<String> names(io.micrometer.core.instrument.MeterRegistry meters) {
        return meters.getMeters().stream().map(m -> m.getId().toString()).sorted().toList();
    }

    @Test
    void aConfiguredClusterIdPinsTheBroker() {
        String id = "0123456789abcdef0123456789abcdef";
        try (ConfigurableApplicationContext ctx = app("ticketing.addrs=127.0.0.1:1", "ticketing.cluster-id=" + id)) {
            assertEquals(java.util.Optional.of(id), ctx.getBean(TicketBroker.class).clusterId(),
                    "ticketing.cluster-id pins the broker before it reaches any server");
        }
        Exception e = assertThrows(Exception.class, () -> app("ticketing.addrs=127.0.0.1:1", "ticketing.cluster-id=n1").close());
        Throwable t = e;
        while (t.getCause() != null && !(t instanceof InvalidArgumentException)) {
            t = t.getCause();
        }
        assertTrue(t.getMessage().contains("32 hex digits"), e.toString());
    }

    /**
     * With ticketing-shedlock and ticketing-spring-integration on the class
     * path, the application gets the coordination client, a ShedLock
     * provider and a lock registry on the broker, each with its settings and
     * a gauge of the locks it holds; each can be switched off.
     */
    @Test
    void coordinationShedLockAndTheLockRegistryOnTheBroker() throws Exception {
        try (AutoCloseable cluster = TicketdAccess.start(1)) {
            try (ConfigurableApplicationContext ctx = app("ticketing.addrs=" + TicketdAccess.addrs(cluster),
                    "ticketing.shedlock.node=/jobs", "ticketing.lock-registry.session-timeout=5s")) {
                ctx.getBean(TicketBroker.class).waitReadyBlocking(Duration.ofSeconds(30));
                assertTrue(ctx.getBeanNamesForType(io.ticketing.coordination.CoordinationClient.class).length == 1);
                var provider = ctx.getBean(io.ticketing.shedlock.TicketingLockProvider.class);
                assertSame(provider, ctx.getBean(net.javacrumbs.shedlock.core.LockProvider.class));
                assertEquals("/jobs", provider.node());
                io.micrometer.core.instrument.MeterRegistry meters = ctx.getBean(io.micrometer.core.instrument.MeterRegistry.class);
                var lock = provider.lock(new net.javacrumbs.shedlock.core.LockConfiguration(java.time.Instant.now(), "job",
                        Duration.ofMinutes(10), Duration.ZERO)).orElseThrow();
                assertTrue(provider.tokenOf("job").orElseThrow() > 0);
                assertEquals(1.0, meters.get("ticketing.shedlock.held").gauge().value());
                Object health = ctx.getBean("ticketingHealthIndicator");
                assertEquals(1, details(health).get("shedlockHeld"), "the health indicator's details: " + details(health));
                assertEquals(0, details(health).get("lockRegistryHeld"));
                lock.unlock();
                assertEquals(0.0, meters.get("ticketing.shedlock.held").gauge().value());

                var registry = ctx.getBean(io.ticketing.spring.integration.TicketingLockRegistry.class);
                assertSame(registry, ctx.getBean(org.springframework.integration.support.locks.LockRegistry.class));
                var l = registry.obtain("orders");
                assertTrue(l.tryLock(5, TimeUnit.SECONDS));
                assertTrue(l.token() > 0);
                assertEquals(1.0, meters.get("ticketing.lock.registry.held").gauge().value());
                l.unlock();
                assertEquals(0.0, meters.get("ticketing.lock.registry.held").gauge().value());
            }
        }
        try (ConfigurableApplicationContext ctx = app("ticketing.addrs=127.0.0.1:1", "ticketing.shedlock.enabled=false",
                "ticketing.lock-registry.enabled=false")) {
            assertEquals(0, ctx.getBeanNamesForType(net.javacrumbs.shedlock.core.LockProvider.class).length);
            assertEquals(0, ctx.getBeanNamesForType(org.springframework.integration.support.locks.LockRegistry.class).length);
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
