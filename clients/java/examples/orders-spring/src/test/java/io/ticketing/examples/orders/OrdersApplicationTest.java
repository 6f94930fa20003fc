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
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.web.context.WebServerApplicationContext;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Two instances of the example against a real ticketd and a real PostgreSQL;
 * many concurrent payment requests for one order, spread over both: exactly
 * one payment is recorded, and everybody is told so.
 */
@Timeout(180)
class OrdersApplicationTest {
    static ConfigurableApplicationContext instance(String name, String ticketd, String db) {
        return new SpringApplicationBuilder(OrdersApplication.class).properties(
                "server.port=0", "spring.main.banner-mode=off", "logging.level.root=OFF",
                "spring.datasource.url=" + db, "ticketing.addrs=" + ticketd, "orders.instance=" + name).run();
    }

    static int port(ConfigurableApplicationContext c) {
        return ((WebServerApplicationContext) c).getWebServer().getPort();
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
            }
        }
    }
}
