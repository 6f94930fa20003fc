package io.ticketing.examples.orders;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.ticketing.TicketdAccess;
import io.ticketing.jdbc.PgServer;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Two instances of the example against a real ticketd and a real PostgreSQL;
 * many concurrent payment requests for one order, spread over both: exactly
 * one payment is recorded, and everybody is told so. An outage of either is
 * answered 503 with Retry-After.
 */
@Timeout(180)
class OrdersApplicationTest {
    static ConfigurableApplicationContext instance(String name, String ticketd, String db) {
        return new SpringApplicationBuilder(OrdersApplication.class).properties(
                "server.port=0", "spring.main.banner-mode=off", "logging.level.root=OFF",
                "spring.datasource.url=" + db, "ticketing.addrs=" + ticketd, "orders.instance=" + name).run();
    }

    static int port(ConfigurableApplicationContext c) {
        // the property, not WebServerApplicationContext: that interface moved in Spring Boot 4
        return c.getEnvironment().getRequiredProperty("local.server.port", Integer.class);
    }

    static String get(HttpClient http, String url) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(url)).GET().build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    /** The count of ticketing.transaction.retries for serialization failures, read from Actuator (0 before the first). */
    static double abortedRetries(HttpClient http, String base) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base
                + "/actuator/metrics/ticketing.transaction.retries?tag=class:ABORTED")).GET().build(), HttpResponse.BodyHandlers.ofString());
        if (r.statusCode() == 404) {
            return 0;
        }
        assertEquals(200, r.statusCode(), r.body());
        Matcher m = Pattern.compile("\"statistic\":\"COUNT\",\"value\":([0-9.]+)").matcher(r.body());
        assertTrue(m.find(), r.body());
        return Double.parseDouble(m.group(1));
    }

    /**
     * Another transaction changes the order under the payment's repeatable-read
     * snapshot: PostgreSQL fails the payment's update with SQLSTATE 40001, the
     * retry module runs the payment again, and Actuator shows the retry.
     */
    static void aRealSerializationFailureIsRetriedAndCounted(HttpClient http, String base, String db) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base + "/orders/43"))
                .PUT(HttpRequest.BodyPublishers.ofString("{\"amount_cents\": 500}"))
                .header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
        assertEquals(201, r.statusCode(), r.body());
        double before = abortedRetries(http, base);
        CompletableFuture<HttpResponse<String>> pay;
        try (Connection other = DriverManager.getConnection(db); Statement st = other.createStatement();
                Connection watcher = DriverManager.getConnection(db); Statement probe = watcher.createStatement()) {
            other.setAutoCommit(false);
            st.executeUpdate("UPDATE orders SET amount_cents = amount_cents WHERE id = '43'"); // holds the row
            pay = http.sendAsync(HttpRequest.newBuilder(URI.create(base + "/orders/43/pay")).POST(HttpRequest.BodyPublishers.noBody()).build(),
                    HttpResponse.BodyHandlers.ofString());
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (true) { // until the payment waits for the row
                try (ResultSet rs = probe.executeQuery("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                + " AND query LIKE 'UPDATE orders SET status%'")) {
                    rs.next();
                    if (rs.getInt(1) > 0) {
                        break;
                    }
                }
                assertTrue(System.nanoTime() < end, "the payment never waited for the order's row");
                assertTrue(!pay.isDone(), "the payment ended without meeting the other transaction: " + (pay.isDone() ? pay.get().body() : ""));
                Thread.sleep(10);
            }
            other.commit(); // the row changed after the payment's snapshot: 40001 for the payment
        }
        r = pay.get(60, TimeUnit.SECONDS);
        assertEquals(200, r.statusCode(), r.body());
        assertTrue(r.body().contains("\"status\":\"paid\""), r.body());
        assertEquals(before + 1, abortedRetries(http, base), "ticketing.transaction.retries{class=ABORTED} through Actuator");
    }

    static HttpResponse<String> pay(HttpClient http, String base, String id) throws Exception {
        return http.send(HttpRequest.newBuilder(URI.create(base + "/orders/" + id + "/pay")).POST(HttpRequest.BodyPublishers.noBody())
                .timeout(java.time.Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofString());
    }

    /**
     * An outage of PostgreSQL, then of Ticketing: a payment is answered 503
     * with Retry-After (the client may try again), never 500, and the
     * other endpoints too.
     */
    @Test
    void anOutageIsAnswered503WithRetryAfter() throws Exception {
        PgServer pg = PgServer.start();
        boolean pgStopped = false;
        try (AutoCloseable cluster = TicketdAccess.start(1)) {
            String db = pg.newDatabase();
            try (ConfigurableApplicationContext a = instance("a", TicketdAccess.addrs(cluster), db)) {
                HttpClient http = HttpClient.newHttpClient();
                String base = "http://127.0.0.1:" + port(a);
                HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base + "/orders/44"))
                        .PUT(HttpRequest.BodyPublishers.ofString("{\"amount_cents\": 700}"))
                        .header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(201, r.statusCode(), r.body());

                pgStopped = true;
                pg.close(); // the database goes away; Ticketing stays
                r = pay(http, base, "44");
                assertEquals(503, r.statusCode(), "a payment while PostgreSQL is down: " + r.body());
                assertEquals("1", r.headers().firstValue("Retry-After").orElse(null), r.headers().map().toString());
                assertTrue(r.body().contains("database is unavailable"), r.body());
                r = http.send(HttpRequest.newBuilder(URI.create(base + "/orders/44")).GET()
                        .timeout(java.time.Duration.ofSeconds(60)).build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(503, r.statusCode(), "a read while PostgreSQL is down: " + r.body());
                assertTrue(r.headers().firstValue("Retry-After").isPresent(), r.headers().map().toString());

                cluster.close(); // and Ticketing too: the ticket cannot be had
                r = pay(http, base, "44");
                assertEquals(503, r.statusCode(), "a payment while Ticketing is down: " + r.body());
                assertEquals("1", r.headers().firstValue("Retry-After").orElse(null), r.headers().map().toString());
                assertTrue(r.body().contains("Ticketing is unavailable"), r.body());
            }
        } finally {
            if (!pgStopped) {
                pg.close();
            }
        }
    }

    @Test
    void anOrderIsPaidExactlyOnceAcrossInstances() throws Exception {
        try (PgServer pg = PgServer.start(); AutoCloseable cluster = TicketdAccess.start(1)) {
            String db = pg.newDatabase();
            try (ConfigurableApplicationContext a = instance("a", TicketdAccess.addrs(cluster), db);
                    ConfigurableApplicationContext b = instance("b", TicketdAccess.addrs(cluster), db)) {
                HttpClient http = HttpClient.newHttpClient();
                String base = "http://127.0.0.1:" + port(a);
                HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(base + "/orders/42"))
                        .PUT(HttpRequest.BodyPublishers.ofString("{\"amount_cents\": 1250}"))
                        .header("Content-Type", "application/json").build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(201, r.statusCode(), r.body());
                assertTrue(a.getEnvironment().getProperty("spring.threads.virtual.enabled", Boolean.class, false),
                        "the example serves requests on virtual threads");
                r = http.send(HttpRequest.newBuilder(URI.create(base + "/orders/42")).GET().build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(200, r.statusCode());
                assertTrue(r.body().contains("\"status\":\"new\""), r.body());

                Map<Integer, Integer> codes = new ConcurrentHashMap<>();
                List<CompletableFuture<Void>> all = new ArrayList<>();
                for (int i = 0; i < 20; i++) {
                    int p = port(i % 2 == 0 ? a : b);
                    all.add(http.sendAsync(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + p + "/orders/42/pay"))
                            .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString())
                            .thenAccept(resp -> codes.merge(resp.statusCode(), 1, Integer::sum)));
                }
                CompletableFuture.allOf(all.toArray(new CompletableFuture[0])).get(120, TimeUnit.SECONDS);
                assertEquals(Integer.valueOf(1), codes.get(200), "exactly one request pays: " + codes);
                assertEquals(20, codes.getOrDefault(200, 0) + codes.getOrDefault(409, 0) + codes.getOrDefault(503, 0), "unexpected answers: " + codes);
                try (Connection c = DriverManager.getConnection(db); Statement st = c.createStatement();
                        ResultSet rs = st.executeQuery("SELECT count(*) FROM payments WHERE order_id = '42'")) {
                    rs.next();
                    assertEquals(1, rs.getInt(1), "the payment was recorded more than once");
                }
                r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + port(b) + "/orders/42/pay"))
                        .POST(HttpRequest.BodyPublishers.noBody()).build(), HttpResponse.BodyHandlers.ofString());
                assertEquals(409, r.statusCode());
                assertTrue(r.body().contains("order already paid"), r.body());

                assertTrue(get(http, base + "/actuator/health").contains("\"ticketing\":{\"status\":\"UP\""),
                        "the ticketing health indicator through Actuator: " + get(http, base + "/actuator/health"));
                aRealSerializationFailureIsRetriedAndCounted(http, base, db);
            }
        }
    }
}
