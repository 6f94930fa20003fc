package io.ticketing.spring.retry;

import io.micrometer.core.instrument.MeterRegistry;
import java.util.function.Supplier;
import org.jspecify.annotations.Nullable;

/**
 * A Micrometer registry looked up when first needed, not when the object
 * that records into it is made (so that it does not force the registry's
 * creation early), and kept once found. The retry module's
 * {@link MicrometerRetryObserver} and the starter's broker listener record
 * through one.
 */
public final class MeterRegistryLookup {
    private final Supplier<@Nullable MeterRegistry> source;
    private volatile @Nullable MeterRegistry registry;

    /**
     * A lookup in source.
     *
     * @param source the registry (null: none yet; asked again at the next need)
     */
    public MeterRegistryLookup(Supplier<@Nullable MeterRegistry> source) {
        this.source = source;
    }

    /**
     * The registry.
     *
     * @return the registry, or null while there is none
     */
    public @Nullable MeterRegistry get() {
        MeterRegistry r = registry;
        if (r == null) {
            r = source.get();
            registry = r;
        }
        return r;
    }
}
