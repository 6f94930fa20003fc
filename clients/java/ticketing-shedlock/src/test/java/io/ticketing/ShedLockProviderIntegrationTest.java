package io.ticketing;

import static org.assertj.core.api.Assertions.assertThat;

import io.ticketing.coordination.CoordinationClient;
import io.ticketing.coordination.NotFoundException;
import io.ticketing.coordination.Session;
import io.ticketing.shedlock.TicketingLockProvider;
import java.time.Duration;
import java.util.Optional;
import net.javacrumbs.shedlock.core.ExtensibleLockProvider;
import net.javacrumbs.shedlock.core.SimpleLock;
import net.javacrumbs.shedlock.test.support.AbstractExtensibleLockProviderIntegrationTest;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * ShedLock's own integration tests (shedlock-test-support, unmodified)
 * against a real ticketd. Two are overridden, both for one product rule:
 * a ticket's lease is whole seconds (1..250 s), so a lock with a
 * lockAtMostFor of a few milliseconds lasts 1 s.
 */
@Timeout(180)
class ShedLockProviderIntegrationTest extends AbstractExtensibleLockProviderIntegrationTest {
    static Ticketd cluster;
    static TicketBroker broker;
    static TicketBroker observerBroker;
    static CoordinationClient observerClient;
    static Session observer;
    static TicketingLockProvider provider;

    @BeforeAll
    static void start() throws Exception {
        cluster = new Ticketd(1);
        String addr = cluster.awaitLeader(30_000).addr;
        broker = TicketBroker.connect(addr);
        provider = TicketingLockProvider.create(broker);
        // A second client sees the locks as another process would.
        observerBroker = TicketBroker.connect(addr);
        observerClient = CoordinationClient.create(observerBroker);
        provider.tokenOf("warm-up"); // nothing held yet
        Optional<SimpleLock> first = provider.lock(new net.javacrumbs.shedlock.core.LockConfiguration(java.time.Instant.now(), "warm-up",
                Duration.ofMinutes(5), Duration.ZERO)); // opens the provider's session and creates its node
        first.orElseThrow().unlock();
        observer = observerClient.sessionBlocking(provider.node(), Duration.ofSeconds(10), "observer");
    }

    @AfterAll
    static void stop() throws Exception {
        provider.close();
        observer.close();
        observerClient.close();
        observerBroker.close();
        broker.close();
        cluster.close();
    }

    @Override
    protected ExtensibleLockProvider getLockProvider() {
        return provider;
    }

    private static boolean locked(String lockName) {
        String key = provider.keyOf(lockName);
        if (observerBroker.describeBlocking(key).held()) {
            return true;
        }
        try {
            return !observer.describeSemaphoreBlocking(key, true, false).owners().isEmpty();
        } catch (NotFoundException e) {
            return false;
        }
    }

    @Override
    protected void assertUnlocked(String lockName) {
        assertThat(locked(lockName)).describedAs(lockName + " is held as another client sees it").isFalse();
    }

    @Override
    protected void assertLocked(String lockName) {
        assertThat(locked(lockName)).describedAs(lockName + " is free as another client sees it").isTrue();
    }

    /**
     * Overridden: a ticket's lease is whole seconds, so the published 50 ms
     * lockAtMostFor holds 1 s and is still held after 100 ms. The same test
     * with a 1 s lockAtMostFor.
     */
    @Override
    @Test
    public void shouldTimeout() throws InterruptedException {
        doTestTimeout(Duration.ofSeconds(1));
    }

    /**
     * Overridden: a ticket's lease is whole seconds, so the published 2 ms
     * lockAtMostFor holds 1 s and is still held after 4 ms. The same test
     * with a 1 s lockAtMostFor and a 2 s pause.
     */
    @Override
    @Test
    public void shouldNotBeAbleToExtendExpiredLock() {
        Optional<SimpleLock> lock = getLockProvider().lock(lockConfig(LOCK_NAME1, Duration.ofSeconds(1), Duration.ZERO));
        assertThat(lock).isNotEmpty();
        sleepFor(Duration.ofSeconds(2));

        Optional<SimpleLock> newLock = lock.get().extend(Duration.ofSeconds(10), Duration.ZERO);
        assertThat(newLock).isEmpty();
        assertUnlocked(LOCK_NAME1);
    }
}
