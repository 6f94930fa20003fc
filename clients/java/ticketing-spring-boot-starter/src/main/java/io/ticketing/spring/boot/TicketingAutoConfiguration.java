package io.ticketing.spring.boot;

import io.ticketing.TicketBroker;
import io.ticketing.TlsMode;
import java.util.concurrent.Executor;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.boot.actuate.health.HealthIndicator;
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
 * broker has a live session with the leader.
 */
@AutoConfiguration(after = TaskExecutionAutoConfiguration.class)
@ConditionalOnClass(TicketBroker.class)
@ConditionalOnProperty(prefix = "ticketing", name = "addrs")
@EnableConfigurationProperties(TicketingProperties.class)
public class TicketingAutoConfiguration {
    /** Spring Boot's name for the application's task executor. */
    public static final String APPLICATION_TASK_EXECUTOR = "applicationTaskExecutor";

    @Bean(destroyMethod = "close")
    @ConditionalOnMissingBean
    public TicketBroker ticketBroker(TicketingProperties p, ObjectProvider<org.springframework.beans.factory.BeanFactory> bf) {
        TicketBroker.Builder b = TicketBroker.builder()
                .addrs(p.getAddrs().toArray(new String[0]))
                .token(p.getToken())
                .connectWait(p.getConnectWait())
                .tls(tls(p.getTls()));
        org.springframework.beans.factory.BeanFactory f = bf.getIfAvailable();
        if (f != null && f.containsBean(APPLICATION_TASK_EXECUTOR)) {
            b.executor(f.getBean(APPLICATION_TASK_EXECUTOR, Executor.class));
        }
        return b.connect();
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

    /** The health indicator, with Spring Boot Actuator present. */
    @Configuration(proxyBeanMethods = false)
    @ConditionalOnClass(HealthIndicator.class)
    static class Health {
        @Bean
        @ConditionalOnMissingBean(name = "ticketingHealthIndicator")
        HealthIndicator ticketingHealthIndicator(TicketBroker broker) {
            return new TicketingHealthIndicator(broker);
        }
    }

    /** UP while the broker has a live session with the leader; DOWN with the reason otherwise. */
    public static final class TicketingHealthIndicator implements HealthIndicator {
        private final TicketBroker broker;

        public TicketingHealthIndicator(TicketBroker broker) {
            this.broker = broker;
        }

        @Override
        public org.springframework.boot.actuate.health.Health health() {
            if (broker.isConnected()) {
                return org.springframework.boot.actuate.health.Health.up().build();
            }
            return org.springframework.boot.actuate.health.Health.down()
                    .withDetail("reason", broker.connectionProblem().orElse("not connected")).build();
        }
    }
}
