package io.ticketing.spring.boot;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Timer;
import io.ticketing.BrokerListener;
import io.ticketing.ClosedException;
import io.ticketing.IndeterminateException;
import io.ticketing.NotHeldException;
import io.ticketing.PermissionDeniedException;
import io.ticketing.ReleaseDroppedException;
import io.ticketing.TicketingException;
import io.ticketing.UnavailableException;
import io.ticketing.spring.retry.MeterRegistryLookup;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The broker's events as Micrometer meters:
 *
 * <ul>
 *   <li>{@code ticketing.acquire} (timer), tag {@code outcome}: granted, not_acquired, capacity, ...
 *       ({@link BrokerListener#ACQUIRE_OUTCOMES});
 *   <li>{@code ticketing.reconnects} (counter): sessions begun after an earlier one ended;
 *   <li>{@code ticketing.leader.changes} (counter): sessions with another server than the previous one;
 *   <li>{@code ticketing.background.releases} (counter), tag {@code outcome}: released, not_held,
 *       indeterminate, unavailable, dropped, closed, permission_denied, other ({@link #RELEASE_OUTCOMES}).
 * </ul>
 *
 * The registry is looked up when first needed, so that the broker does not
 * force the registry's creation early; {@link #registerMeters} registers
 * every meter (each outcome) at zero, which the starter does once the
 * application's beans exist, so that dashboards and alerts see them before
 * the first event.
 */
public final class MicrometerBrokerListener implements BrokerListener {
    /** Every outcome of {@code ticketing.background.releases}. */
    public static final List<String> RELEASE_OUTCOMES = List.of("released", "not_held", "indeterminate", "unavailable", "dropped",
            "closed", "permission_denied", "other");

    private final MeterRegistryLookup registry;

    /**
     * A listener recording into the registry that source gives.
     *
     * @param source the registry, looked up when first needed (null: nothing is recorded yet)
     */
    public MicrometerBrokerListener(Supplier<@Nullable MeterRegistry> source) {
        this.registry = new MeterRegistryLookup(source);
    }

    /**
     * Registers every meter at zero, each outcome of the tagged ones
     * included, so that they exist before their first event. Does nothing
     * while there is no registry.
     */
    public void registerMeters() {
        MeterRegistry r = registry.get();
        if (r == null) {
            return;
        }
        for (String outcome : ACQUIRE_OUTCOMES) {
            acquireTimer(r, outcome);
        }
        reconnects(r);
        leaderChanges(r);
        for (String outcome : RELEASE_OUTCOMES) {
            backgroundReleases(r, outcome);
        }
    }

    private static Timer acquireTimer(MeterRegistry r, String outcome) {
        return Timer.builder("ticketing.acquire").description("Ticketing acquires, by outcome").tag("outcome", outcome).register(r);
    }

    private static Counter reconnects(MeterRegistry r) {
        return Counter.builder("ticketing.reconnects").description("Sessions begun after an earlier one ended").register(r);
    }

    private static Counter leaderChanges(MeterRegistry r) {
        return Counter.builder("ticketing.leader.changes").description("Sessions begun with another server than the previous one").register(r);
    }

    private static Counter backgroundReleases(MeterRegistry r, String outcome) {
        return Counter.builder("ticketing.background.releases").description("Background releases, by outcome").tag("outcome", outcome).register(r);
    }

    @Override
    public void acquireFinished(String outcome, long nanos) {
        MeterRegistry r = registry.get();
        if (r != null) {
            acquireTimer(r, outcome).record(nanos, TimeUnit.NANOSECONDS);
        }
    }

    @Override
    public void sessionStarted(String address, boolean reconnect, boolean leaderChanged) {
        MeterRegistry r = registry.get();
        if (r == null) {
            return;
        }
        if (reconnect) {
            reconnects(r).increment();
        }
        if (leaderChanged) {
            leaderChanges(r).increment();
        }
    }

    @Override
    public void backgroundReleaseFinished(@Nullable TicketingException error) {
        MeterRegistry r = registry.get();
        if (r != null) {
            backgroundReleases(r, releaseOutcome(error)).increment();
        }
    }

    static String releaseOutcome(@Nullable TicketingException e) {
        if (e == null) {
            return "released";
        }
        if (e instanceof NotHeldException) {
            return "not_held";
        }
        if (e instanceof ReleaseDroppedException) {
            return "dropped";
        }
        if (e instanceof IndeterminateException) {
            return "indeterminate";
        }
        if (e instanceof UnavailableException) {
            return "unavailable";
        }
        if (e instanceof ClosedException) {
            return "closed";
        }
        if (e instanceof PermissionDeniedException) {
            return "permission_denied";
        }
        return "other";
    }
}
