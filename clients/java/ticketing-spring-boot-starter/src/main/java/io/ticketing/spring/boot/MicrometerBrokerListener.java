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
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The broker's events as Micrometer meters:
 *
 * <ul>
 *   <li>{@code ticketing.acquire} (timer), tag {@code outcome}: granted, not_acquired, capacity, ...
 *       ({@link BrokerListener#acquireFinished});
 *   <li>{@code ticketing.reconnects} (counter): sessions begun after an earlier one ended;
 *   <li>{@code ticketing.leader.changes} (counter): sessions with another server than the previous one;
 *   <li>{@code ticketing.background.releases} (counter), tag {@code outcome}: released, not_held,
 *       indeterminate, unavailable, dropped, closed, permission_denied, other.
 * </ul>
 *
 * The registry is looked up at the first event, so that the broker does not
 * force the registry's creation early.
 */
public final class MicrometerBrokerListener implements BrokerListener {
    private final Supplier<@Nullable MeterRegistry> source;
    private volatile @Nullable MeterRegistry registry;

    /**
     * A listener recording into the registry that source gives.
     *
     * @param source the registry, looked up at the first event (null: nothing is recorded yet)
     */
    public MicrometerBrokerListener(Supplier<@Nullable MeterRegistry> source) {
        this.source = source;
    }

    private @Nullable MeterRegistry registry() {
        MeterRegistry r = registry;
        if (r == null) {
            r = source.get();
            registry = r;
        }
        return r;
    }

    @Override
    public void acquireFinished(String outcome, long nanos) {
        MeterRegistry r = registry();
        if (r != null) {
            Timer.builder("ticketing.acquire").description("Ticketing acquires, by outcome")
                    .tag("outcome", outcome).register(r).record(nanos, TimeUnit.NANOSECONDS);
        }
    }

    @Override
    public void sessionStarted(String address, boolean reconnect, boolean leaderChanged) {
        MeterRegistry r = registry();
        if (r == null) {
            return;
        }
        if (reconnect) {
            Counter.builder("ticketing.reconnects").description("Sessions begun after an earlier one ended").register(r).increment();
        }
        if (leaderChanged) {
            Counter.builder("ticketing.leader.changes").description("Sessions begun with another server than the previous one")
                    .register(r).increment();
        }
    }

    @Override
    public void backgroundReleaseFinished(@Nullable TicketingException error) {
        MeterRegistry r = registry();
        if (r != null) {
            Counter.builder("ticketing.background.releases").description("Background releases, by outcome")
                    .tag("outcome", releaseOutcome(error)).register(r).increment();
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
