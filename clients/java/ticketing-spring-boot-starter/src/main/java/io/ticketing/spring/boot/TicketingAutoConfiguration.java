package io.ticketing.spring.boot;

import io.ticketing.BrokerListener;
import io.ticketing.TicketBroker;
import io.ticketing.TlsMode;
import io.ticketing.coordination.CoordinationClient;
import java.util.concurrent.Executor;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.boot.autoconfigure.condition.ConditionalOnClass;
import org.springframework.boot.autoconfigure.condition.ConditionalOnMissingBean;
import org.springframework.boot.autoconfigure.condition.ConditionalOnProperty;
import org.springframework.boot.autoconfigure.task.TaskExecutionAutoConfiguration;
import org.springframework.boot.context.properties.EnableConfigurationProperties;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * A {@link TicketBroker} bean built from {@code ticketing.*} when
 * {@code ticketing.addrs} is set, closed with the context. Background releases
 * run on the application's task executor ({@code applicationTaskExecutor})
 * when there is one, otherwise on virtual threads. With Spring Boot Actuator
 * on the classpath, a health indicator {@code ticketing} reports whether the
 * broker has a live session with the leader: {@link TicketingHealthIndicator}
 * on Spring Boot 3, {@link TicketingBoot4HealthIndicator} on Spring Boot 4
 * (whose health API moved to {@code org.springframework.boot.health}). With
 * Micrometer on the classpath, the broker's meters go to the application's
 * {@code MeterRegistry} ({@link MicrometerBrokerListener}).
 *
 * <p>A {@link CoordinationClient} on the broker's connection. With
 * ticketing-shedlock on the classpath, a ShedLock {@code LockProvider}
 * ({@code TicketingLockProvider}, {@code ticketing.shedlock.*}); with
 * ticketing-spring-integration, a Spring Integration {@code LockRegistry}
 * ({@code TicketingLockRegistry}, {@code ticketing.lock-registry.*}); each
 * unless the application defines its own, with a gauge of the locks it holds
 * ({@code ticketing.shedlock.held}, {@code ticketing.lock.registry.held})
 * when Micrometer is there, and the same counts in the health indicator's
 * details ({@code shedlockHeld}, {@code lockRegistryHeld}).
 */
@AutoConfiguration(after = TaskExecutionAutoConfiguration.class)
@ConditionalOnClass(TicketBroker.class)
@ConditionalOnProperty(prefix = "ticketing", name = "addrs")
@EnableConfigurationProperties(TicketingProperties.class)
public class TicketingAutoConfiguration {
    /** Spring Boot's name for the application's task executor. */
    public static final String APPLICATION_TASK_EXECUTOR = "applicationTaskExecutor";

    /** Settings with the defaults. */
    public TicketingAutoConfiguration() {}

    /**
     * The broker, connecting in the background.
     *
     * @param p the ticketing.* properties
     * @param bf the bean factory, for the application's task executor
     * @param listener the broker's listener (the Micrometer one when Micrometer is there), if any
     * @return the broker
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public TicketBroker ticketBroker(TicketingProperties p, ObjectProvider<org.springframework.beans.factory.BeanFactory> bf,
            ObjectProvider<BrokerListener> listener) {
        TicketBroker.Builder b = TicketBroker.builder()
                .addrs(p.getAddrs().toArray(new String[0]))
                .token(p.getToken())
                .connectWait(p.getConnectWait())
                .tls(tls(p.getTls()));
        if (p.getClusterId() != null && !p.getClusterId().isBlank()) {
            b.clusterId(p.getClusterId());
        }
        org.springframework.beans.factory.BeanFactory f = bf.getIfAvailable();
        if (f != null && f.containsBean(APPLICATION_TASK_EXECUTOR)) {
            b.executor(f.getBean(APPLICATION_TASK_EXECUTOR, Executor.class));
        }
        listener.ifAvailable(b::listener);
        return b.connect();
    }

    /**
     * The coordination client on the broker's connection.
     *
     * @param broker the broker
     * @return the client, closed with the context
     */
    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public CoordinationClient ticketingCoordinationClient(TicketBroker broker) {
        return CoordinationClient.create(broker);
    }

    /** The ShedLock provider, with ticketing-shedlock (and so ShedLock) on the classpath. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = {"io.ticketing.shedlock.TicketingLockProvider", "net.javacrumbs.shedlock.core.LockProvider"})
    @ConditionalOnProperty(prefix = "ticketing.shedlock", name = "enabled", matchIfMissing = true)
    static class ShedLockProvider {
        @Bean(destroyMethod = "close")
        @ConditionalOnMissingBean(type = "net.javacrumbs.shedlock.core.LockProvider")
        io.ticketing.shedlock.TicketingLockProvider ticketingLockProvider(TicketBroker broker, TicketingProperties p) {
            TicketingProperties.Shedlock s = p.getShedlock();
            return io.ticketing.shedlock.TicketingLockProvider.builder(broker).node(s.getNode()).prefix(s.getPrefix())
                    .sessionTimeout(s.getSessionTimeout()).build();
        }

        @Bean
        HeldLocks ticketingShedLockHeld(ObjectProvider<io.ticketing.shedlock.TicketingLockProvider> provider) {
            return new HeldLocks() {
                @Override
                public String name() {
                    return "shedlockHeld";
                }

                @Override
                public int held() {
                    io.ticketing.shedlock.TicketingLockProvider p = provider.getIfUnique();
                    return p == null ? 0 : p.heldCount();
                }
            };
        }

        @Configuration(proxyBeanMethods = false)
        @ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
        static class Meters {
            @Bean
            SmartInitializingSingleton ticketingShedLockGauge(ObjectProvider<io.micrometer.core.instrument.MeterRegistry> registry,
                    ObjectProvider<io.ticketing.shedlock.TicketingLockProvider> provider) {
                return () -> provider.ifAvailable(lp -> registry.ifUnique(r -> io.micrometer.core.instrument.Gauge
                        .builder("ticketing.shedlock.held", lp, io.ticketing.shedlock.TicketingLockProvider::heldCount)
                        .description("ShedLock locks this process holds").register(r)));
            }
        }
    }

    /** The Spring Integration lock registry, with ticketing-spring-integration (and so Spring Integration) on the classpath. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = {"io.ticketing.spring.integration.TicketingLockRegistry",
        "org.springframework.integration.support.locks.LockRegistry"})
    @ConditionalOnProperty(prefix = "ticketing.lock-registry", name = "enabled", matchIfMissing = true)
    static class IntegrationLockRegistry {
        @Bean(destroyMethod = "close")
        @ConditionalOnMissingBean(type = "org.springframework.integration.support.locks.LockRegistry")
        io.ticketing.spring.integration.TicketingLockRegistry ticketingLockRegistry(TicketBroker broker, TicketingProperties p) {
            TicketingProperties.LockRegistry s = p.getLockRegistry();
            return io.ticketing.spring.integration.TicketingLockRegistry.builder(broker).node(s.getNode()).prefix(s.getPrefix())
                    .sessionTimeout(s.getSessionTimeout()).build();
        }

        @Bean
        HeldLocks ticketingLockRegistryHeld(ObjectProvider<io.ticketing.spring.integration.TicketingLockRegistry> registry) {
            return new HeldLocks() {
                @Override
                public String name() {
                    return "lockRegistryHeld";
                }

                @Override
                public int held() {
                    io.ticketing.spring.integration.TicketingLockRegistry r = registry.getIfUnique();
                    return r == null ? 0 : r.heldCount();
                }
            };
        }

        @Configuration(proxyBeanMethods = false)
        @ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
        static class Meters {
            @Bean
            SmartInitializingSingleton ticketingLockRegistryGauge(ObjectProvider<io.micrometer.core.instrument.MeterRegistry> registry,
                    ObjectProvider<io.ticketing.spring.integration.TicketingLockRegistry> locks) {
                return () -> locks.ifAvailable(lr -> registry.ifUnique(r -> io.micrometer.core.instrument.Gauge
                        .builder("ticketing.lock.registry.held", lr, io.ticketing.spring.integration.TicketingLockRegistry::heldCount)
                        .description("Spring Integration locks this process holds").register(r)));
            }
        }
    }

    /** A count of locks held, for the health indicator's details. */
    interface HeldLocks {
        /**
         * The detail's name.
         *
         * @return the name
         */
        String name();

        /**
         * The count now.
         *
         * @return the locks held
         */
        int held();
    }

    static java.util.Map<String, Object> heldLocks(ObjectProvider<HeldLocks> held) {
        java.util.Map<String, Object> m = new java.util.TreeMap<>();
        held.orderedStream().forEach(h -> m.put(h.name(), h.held()));
        return m;
    }

    static TlsMode tls(TicketingProperties.Tls t) {
        TlsMode m = switch (t.getMode() == null ? "off" : t.getMode().trim().toLowerCase(java.util.Locale.ROOT)) {
            case "off", "" -> TlsMode.off();
            case "system-roots" -> TlsMode.systemRoots();
            case "insecure-skip-verify" -> TlsMode.insecureSkipVerify();
            case "ca" -> {
                if (t.getCa() == null || t.getCa().isBlank()) {
                    throw new IllegalArgumentException("ticketing.tls.mode=ca needs ticketing.tls.ca (a PEM file)");
                }
                yield TlsMode.ca(t.getCa());
            }
            default -> throw new IllegalArgumentException("ticketing.tls.mode \"" + t.getMode()
                    + "\" is not one of off, system-roots, ca, insecure-skip-verify");
        };
        if (t.getCert() != null && !t.getCert().isBlank()) {
            m = m.withClientCert(t.getCert(), t.getKey());
        }
        return m;
    }

    /** Micrometer meters of the broker ({@link MicrometerBrokerListener}), with Micrometer present. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "io.micrometer.core.instrument.MeterRegistry")
    static class Metrics {
        @Bean
        @ConditionalOnMissingBean(BrokerListener.class)
        MicrometerBrokerListener ticketingBrokerListener(ObjectProvider<io.micrometer.core.instrument.MeterRegistry> registry) {
            return new MicrometerBrokerListener(registry::getIfUnique);
        }

        /** Every broker meter at zero once the application's beans exist: present before the first event. */
        @Bean
        SmartInitializingSingleton ticketingMetersAtStart(ObjectProvider<MicrometerBrokerListener> listener) {
            return () -> listener.ifAvailable(MicrometerBrokerListener::registerMeters);
        }
    }

    /** The health indicator on Spring Boot 3 (Actuator's org.springframework.boot.actuate.health). */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.actuate.health.HealthIndicator")
    static class Boot3Health {
        @Bean
        @ConditionalOnMissingBean(name = "ticketingHealthIndicator")
        TicketingHealthIndicator ticketingHealthIndicator(TicketBroker broker, ObjectProvider<HeldLocks> held) {
            return new TicketingHealthIndicator(broker, () -> heldLocks(held));
        }
    }

    /** The health indicator on Spring Boot 4 (spring-boot-health's org.springframework.boot.health.contributor). */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(name = "org.springframework.boot.health.contributor.HealthIndicator")
    static class Boot4Health {
        @Bean
        @ConditionalOnMissingBean(name = "ticketingHealthIndicator")
        TicketingBoot4HealthIndicator ticketingHealthIndicator(TicketBroker broker, ObjectProvider<HeldLocks> held) {
            return new TicketingBoot4HealthIndicator(broker, () -> heldLocks(held));
        }
    }
}
