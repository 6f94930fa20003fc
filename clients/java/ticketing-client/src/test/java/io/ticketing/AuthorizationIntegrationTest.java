package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A real ticketd configured with principals ([auth] in ticketd.toml, tokens
 * hashed by "ticketd hash-token"): refusals (F) surface as
 * PermissionDeniedException with the server's reason, and the broker's one
 * connection keeps serving afterwards.
 */
@Timeout(120)
class AuthorizationIntegrationTest {
    static Ticketd cluster;
    static Path conf;

    @BeforeAll
    static void start() throws Exception {
        conf = Files.createTempFile("ticketd-auth-", ".toml");
        Files.writeString(conf, """
                [[auth.principals]]
                name = "orders"
                role = "client"
                key_prefixes = ["orders/"]
                token_sha256 = ["%s"]

                [[auth.principals]]
                name = "billing"
                role = "client"
                key_prefixes = ["orders/", "billing/"]
                token_sha256 = ["%s"]

                [[auth.principals]]
                name = "watch"
                role = "monitor"
                token_sha256 = ["%s"]
                """.formatted(Ticketd.hashToken("orders-token"), Ticketd.hashToken("billing-token"),
                Ticketd.hashToken("monitor-token")));
        cluster = new Ticketd(1, "-config", conf.toString()).probeToken("orders-token");
        cluster.awaitLeader(30_000);
    }

    @AfterAll
    static void stop() throws Exception {
        if (cluster != null) {
            cluster.close();
        }
        Files.deleteIfExists(conf);
    }

    static TicketBroker broker(String token) {
        TicketBroker b = TicketBroker.builder().addrs(cluster.addrs()).token(token).connect();
        b.waitReadyBlocking(Duration.ofSeconds(20));
        return b;
    }

    @Test
    void aMonitorMayNotTakeTickets() {
        try (TicketBroker mon = broker("monitor-token")) {
            PermissionDeniedException e = assertThrows(PermissionDeniedException.class,
                    () -> mon.acquireBlocking("orders/1", Duration.ZERO, Duration.ofSeconds(5), Duration.ZERO));
            assertEquals(PermissionDeniedException.ROLE, e.reason(), e.getMessage());
            PermissionDeniedException d = assertThrows(PermissionDeniedException.class, () -> mon.describeBlocking("orders/1"));
            assertEquals(PermissionDeniedException.ROLE, d.reason());
            // The session survived both refusals: the broker still has its connection.
            assertEquals(PermissionDeniedException.ROLE, assertThrows(PermissionDeniedException.class,
                    () -> mon.acquireBlocking("orders/1", Duration.ZERO, Duration.ofSeconds(5), Duration.ZERO)).reason());
            mon.waitReadyBlocking(Duration.ofSeconds(1));
        }
    }

    @Test
    void keysOutsideThePrefixesAndOtherPrincipalsTicketsAreRefusedAndTheConnectionKeepsWorking() {
        try (TicketBroker orders = broker("orders-token"); TicketBroker billing = broker("billing-token")) {
            PermissionDeniedException e = assertThrows(PermissionDeniedException.class,
                    () -> orders.acquireBlocking("billing/7", Duration.ofSeconds(2), Duration.ofSeconds(5), Duration.ZERO));
            assertEquals(PermissionDeniedException.KEY, e.reason(), e.getMessage());
            assertTrue(e.getMessage().contains("billing/7") && e.getMessage().contains("key prefixes"), e.getMessage());
            assertEquals(PermissionDeniedException.KEY,
                    assertThrows(PermissionDeniedException.class, () -> orders.describeBlocking("billing/7")).reason());
            assertEquals(PermissionDeniedException.KEY,
                    assertThrows(PermissionDeniedException.class, () -> orders.releaseTokenBlocking("billing/7", 1)).reason());

            // The same connection serves the next requests.
            try (Ticket t = orders.acquireBlocking("orders/42", Duration.ZERO, Duration.ofSeconds(30), Duration.ZERO)) {
                // billing may use the key but not end a ticket granted to orders: F 3, final, the ticket stays held.
                PermissionDeniedException o = assertThrows(PermissionDeniedException.class,
                        () -> billing.releaseTokenBlocking("orders/42", t.getToken()));
                assertEquals(PermissionDeniedException.OWNER, o.reason(), o.getMessage());
                Description d = orders.describeBlocking("orders/42");
                assertTrue(d.held());
                assertEquals(t.getToken(), d.token());
                t.releaseBlocking();
            }
            assertFalse(orders.describeBlocking("orders/42").held());
        }
    }
}
