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
import io.ticketing.spring.retry.RetryClass;
import io.ticketing.spring.retry.RetryClassifier;
import org.apache.commons.logging.Log;
import org.apache.commons.logging.LogFactory;
import org.springframework.dao.DataAccessException;
import org.springframework.http.HttpHeaders;
import org.springframework.transaction.TransactionException;
import org.springframework.web.bind.annotation.ExceptionHandler;
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
 * time), then the fenced, retried transaction, then the release. While
 * Ticketing or PostgreSQL is unavailable every endpoint answers 503 with
 * Retry-After (a request that can be made again), never a 500.
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

    /** Seconds a client should wait before it tries again after a 503. */
    static final String RETRY_AFTER_SECONDS = "1";

    private static final Log log = LogFactory.getLog(OrderController.class);

    record Create(Long amount_cents) {}

    static ResponseEntity<Object> tryAgain(String msg) {
        return ResponseEntity.status(HttpStatus.SERVICE_UNAVAILABLE).header(HttpHeaders.RETRY_AFTER, RETRY_AFTER_SECONDS)
                .body(Map.of("error", msg));
    }

    /**
     * A failure the retry module classes as transient (the database refused
     * or lost the connection, it is shutting down, too many connections, a
     * conflict that outlasted the retries): 503 with Retry-After. Anything
     * else is a bug: 500, logged.
     */
    @ExceptionHandler({DataAccessException.class, TransactionException.class, SQLException.class})
    public ResponseEntity<Object> databaseFailure(Exception e) {
        RetryClass c = RetryClassifier.classify(e);
        if (c.retryable(true)) {
            return tryAgain("the database is unavailable (" + c + "); try again");
        }
        log.error("request failed", e);
        return error(HttpStatus.INTERNAL_SERVER_ERROR, "internal error", null);
    }

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
            return tryAgain("the order is busy or Ticketing is unavailable; try again");
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
