package io.ticketing;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Scenarios of the JVM client's own (src/test/resources/jvm-conformance),
 * run by the coordination runner against faketicketd: its session start is
 * bounded by the answer grace (the Go SDK's by the caller's context, which
 * the shared scenarios cannot name alike), and its watches are registered
 * after their describe's answer, which a Changed can beat.
 */
@Timeout(60)
class JvmConformanceTest {
    @Test
    void aStartPastItsBoundStopsTheSession() throws Exception {
        CoordinationConformanceTest.run(Path.of("src", "test", "resources", "jvm-conformance", "a-start-past-its-bound-stops-the-session.json"));
    }

    @Test
    void aChangeThatBeatsItsWatchIsKept() throws Exception {
        CoordinationConformanceTest.run(Path.of("src", "test", "resources", "jvm-conformance", "a-change-that-beats-its-watch-is-kept.json"));
    }
}
