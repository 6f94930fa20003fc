package io.ticketing.spring.boot;

import io.ticketing.TicketBroker;
import java.util.Map;
import java.util.function.Supplier;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * The {@code ticketing} health indicator on Spring Boot 4: UP while the
 * broker has a live session with the leader, DOWN with the reason otherwise;
 * with the locks held by what shares the broker's connection as details.
 */
public final class TicketingBoot4HealthIndicator implements HealthIndicator {
    private final TicketBroker broker;
    private final Supplier<Map<String, Object>> details;

    /**
     * An indicator for one broker.
     *
     * @param broker the broker whose session is reported
     */
    public TicketingBoot4HealthIndicator(TicketBroker broker) {
        this(broker, Map::of);
    }

    /**
     * An indicator for one broker, with details of what uses its connection
     * (the locks the ShedLock provider and the lock registry hold).
     *
     * @param broker the broker whose session is reported
     * @param details the details to add, read at each check
     */
    public TicketingBoot4HealthIndicator(TicketBroker broker, Supplier<Map<String, Object>> details) {
        this.broker = broker;
        this.details = details;
    }

    @Override
    public Health health() {
        if (broker.isConnected()) {
            return Health.up().withDetails(details.get()).build();
        }
        return Health.down().withDetail("reason", broker.connectionProblem().orElse("not connected")).withDetails(details.get()).build();
    }
}
