package io.ticketing.coordination;

import java.time.Duration;

/**
 * A coordination node's configuration (docs/coordination.md). Zero fields
 * take the default in a create and stay unchanged in an alter.
 *
 * @param selfCheck the self-check period (zero: 1 s by default)
 * @param sessionGrace the session grace period, longer than selfCheck (zero: 10 s by default)
 * @param readMode 1 RELAXED, 2 STRICT (0: default)
 * @param attachMode 1 STRICT, 2 RELAXED (0: default)
 * @param maxSessions at most this many sessions (0: default)
 * @param maxSemaphores at most this many semaphores (0: default)
 * @param maxWaiters at most this many queued acquires (0: default)
 */
public record NodeConfig(Duration selfCheck, Duration sessionGrace, int readMode, int attachMode, long maxSessions,
        long maxSemaphores, long maxWaiters) {
    /**
     * Every field at its default.
     *
     * @return the default configuration
     */
    public static NodeConfig defaults() {
        return new NodeConfig(Duration.ZERO, Duration.ZERO, 0, 0, 0, 0, 0);
    }
}
