package io.ticketing.spring.retry;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * The retry module's decisions as Micrometer counters:
 * {@code ticketing.transaction.retries} (tags {@code method}, {@code class}:
 * the {@link RetryClass}, {@code attempt}: the number of the attempt about to
 * run) and {@code ticketing.transaction.retries.exhausted} (tags
 * {@code method}, {@code class}: a retryable failure thrown because the
 * attempts ran out). The registry is looked up at the first event.
 */
public final class MicrometerRetryObserver implements RetryObserver {
    private final MeterRegistryLookup registry;

    /**
     * An observer recording into the registry that source gives.
     *
     * @param source the registry, looked up at the first event (null: nothing is recorded yet)
     */
    public MicrometerRetryObserver(Supplier<@Nullable MeterRegistry> source) {
        this.registry = new MeterRegistryLookup(source);
    }

    @Override
    public void retrying(String method, RetryClass failure, int nextAttempt) {
        MeterRegistry r = registry.get();
        if (r != null) {
            Counter.builder("ticketing.transaction.retries").description("Transactions run again after a retryable failure")
                    .tag("method", method).tag("class", failure.name()).tag("attempt", Integer.toString(nextAttempt))
                    .register(r).increment();
        }
    }

    @Override
    public void exhausted(String method, RetryClass failure, int attempts) {
        MeterRegistry r = registry.get();
        if (r != null) {
            Counter.builder("ticketing.transaction.retries.exhausted").description("Retryable failures thrown because the attempts ran out")
                    .tag("method", method).tag("class", failure.name()).register(r).increment();
        }
    }
}
