package io.ticketing.examples.orders;

import io.ticketing.CapacityException;
import io.ticketing.IndeterminateException;
import io.ticketing.NotAcquiredException;
import io.ticketing.Ticket;
import io.ticketing.TicketBroker;
import io.ticketing.UnavailableException;
import io.ticketing.jdbc.StaleTokenException;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Map;
import java.util.regex.Pattern;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.PutMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;

/**
 * PUT /orders/{id} {"amount_cents": N}, GET /orders/{id}, POST /orders/{id}/pay.
 * Paying: the order's ticket (wait 5 s, lease 10 s, at least 2 s of work
 * time), then the fenced, retried transaction, then the release.
 */
@RestController
public class OrderController {
    static final Pattern ID = Pattern.compile("[A-Za-z0-9_-]{1,64}");

    private final TicketBroker broker;
    private final OrderStore store;

    public OrderController(TicketBroker broker, OrderStore store) {
        this.broker = broker;
        this.store = store;
    }

    record Create(Long amount_cents) {}

    static ResponseEntity<Object> error(HttpStatus s, String msg, Order o) {
        return ResponseEntity.status(s).body(o == null ? Map.of("error", msg) : Map.of("error", msg, "order", o));
    }

    @PutMapping("/orders/{id}")
    public ResponseEntity<Object> create(@PathVariable("id") String id, @RequestBody Create body) {
        if (!ID.matcher(id).matches()) {
            return error(HttpStatus.BAD_REQUEST, "order id must be 1 to 64 letters, digits, '-' or '_'", null);
        }
        if (body == null || body.amount_cents() == null || body.amount_cents() <= 0) {
            return error(HttpStatus.BAD_REQUEST, "body must be {\"amount_cents\": N} with N > 0", null);
        }
        var created = store.create(id, body.amount_cents());
        Order o = store.get(id).orElseThrow();
        if (created.isEmpty()) {
            return error(HttpStatus.CONFLICT, "the order exists with another amount", o);
        }
        return ResponseEntity.status(created.get() ? HttpStatus.CREATED : HttpStatus.OK).body(o);
    }

    @GetMapping("/orders/{id}")
    public ResponseEntity<Object> get(@PathVariable("id") String id) {
        return store.get(id).<ResponseEntity<Object>>map(ResponseEntity::ok).orElseGet(() -> error(HttpStatus.NOT_FOUND, "no such order", null));
    }

    @PostMapping("/orders/{id}/pay")
    public ResponseEntity<Object> pay(@PathVariable("id") String id) throws SQLException {
        if (!ID.matcher(id).matches()) {
            return error(HttpStatus.BAD_REQUEST, "order id must be 1 to 64 letters, digits, '-' or '_'", null);
        }
        Ticket t;
        try {
            t = broker.acquireBlocking("order-" + id, Duration.ofSeconds(5), Duration.ofSeconds(10), Duration.ofSeconds(2));
        } catch (NotAcquiredException | UnavailableException | CapacityException | IndeterminateException e) {
            return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).header("Retry-After", "1")
                    .body(Map.of("error", "the order is busy or Ticketing is unavailable; try again"));
        }
        try {
            return store.pay(id, t.getToken()).<ResponseEntity<Object>>map(ResponseEntity::ok)
                    .orElseGet(() -> error(HttpStatus.NOT_FOUND, "no such order", null));
        } catch (OrderStore.AlreadyPaid e) {
            return error(HttpStatus.CONFLICT, "order already paid", e.order);
        } catch (StaleTokenException e) {
            return error(HttpStatus.CONFLICT, "this request lost the order's ticket to another one; fetch the order", null);
        } finally {
            t.close(); // after the commit: released in the background
        }
    }
}
