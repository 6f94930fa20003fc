package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Real ticketd processes: a client of a three-server cluster A whose address
 * list also names a lone server of cluster B (its own data directory, as a
 * wiped server restarted as a new cluster would be). With A down, the client
 * refuses B, naming both cluster IDs, and B grants it nothing.
 */
@Timeout(180)
class ClusterPinIntegrationTest {
    @Test
    void aServerOfAnotherClusterIsRefused() throws Exception {
        try (Ticketd a = new Ticketd(3); Ticketd b = new Ticketd(1)) {
            a.awaitLeader(60_000);
            b.awaitLeader(60_000);
            String idA = a.clusterId(60_000);
            String idB = b.clusterId(60_000);
            assertNotEquals(idA, idB);

            try (TicketBroker broker = TicketBroker.builder().addrs(a.addrs(), b.addrs()).connectWait(Duration.ofSeconds(10)).connect()) {
                broker.acquireBlocking("orders/42", Duration.ZERO, Duration.ofSeconds(250), Duration.ZERO);
                assertEquals(Optional.of(idA), broker.clusterId(), "the client pins the cluster it reached first");
                for (Ticketd.Node n : a.nodes) {
                    a.kill(n);
                }
                // Calls made before the broker saw its session end would be sent on it (and be indeterminate).
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
                while (broker.isConnected()) {
                    assertTrue(System.nanoTime() < end, "the broker did not notice that cluster A was killed");
                    Thread.sleep(10); // polling a condition, with a deadline
                }
                for (String key : List.of("orders/42", "orders/43")) {
                    WrongClusterException e = assertThrows(WrongClusterException.class,
                            () -> broker.acquireBlocking(key, Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO));
                    assertEquals(idA, e.pinnedClusterId());
                    assertEquals(idB, e.serverClusterId());
                    assertTrue(e.getMessage().contains(idA) && e.getMessage().contains(idB), e.getMessage());
                }
            }

            // Given A's ID, a client whose only server is B refuses it at once.
            try (TicketBroker pinned = TicketBroker.builder().addrs(b.addrs()).clusterId(idA).connect()) {
                WrongClusterException e = assertThrows(WrongClusterException.class, () -> pinned.waitReadyBlocking(Duration.ofSeconds(30)));
                assertTrue(e.getMessage().contains(idB), e.getMessage());
            }

            // B never granted anything: an unpinned client's grant there is the first of B's sequence.
            try (TicketBroker fresh = TicketBroker.builder().addrs(b.addrs()).connect()) {
                Ticket t = fresh.acquireBlocking("orders/42", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO);
                assertEquals(1, t.getToken(), "the lone server had granted tokens before");
                assertEquals(Optional.of(idB), fresh.clusterId());
            }
        }
    }
}
