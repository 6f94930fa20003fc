package io.ticketing.spring.boot;

import io.ticketing.TicketBroker;
import org.springframework.boot.actuate.health.Health;
import org.springframework.boot.actuate.health.HealthIndicator;

/**
 * The {@code ticketing} health indicator on Spring Boot 3: UP while the
 * broker has a live session with the leader, DOWN with the reason otherwise.
 */
public final class TicketingHealthIndicator implements HealthIndicator {
    private final TicketBroker broker;

    /**
     * An indicator for one broker.
     *
     * @param broker the broker whose session is reported
     */
    public TicketingHealthIndicator(TicketBroker broker) {
        this.broker = broker;
    }

    @Override
    public Health health() {
        if (broker.isConnected()) {
            return Health.up().build();
        }
        return Health.down().withDetail("reason", broker.connectionProblem().orElse("not connected")).build();
    }
}
