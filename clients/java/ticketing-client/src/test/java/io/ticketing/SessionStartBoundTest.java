package io.ticketing;

import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The JVM client's session start is bounded by the answer grace (the Go
 * SDK's by the caller's context, which the shared scenarios cannot name
 * alike): a scenario of its own, run by the coordination runner against
 * faketicketd, checks that a session the server starts after that bound is
 * stopped.
 */
@Timeout(60)
class SessionStartBoundTest {
    @Test
    void aStartPastItsBoundStopsTheSession() throws Exception {
        CoordinationConformanceTest.run(Path.of("src", "test", "resources", "jvm-conformance", "a-start-past-its-bound-stops-the-session.json"));
    }
}
