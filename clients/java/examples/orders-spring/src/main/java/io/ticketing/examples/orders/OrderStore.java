package io.ticketing.examples.orders;

import io.ticketing.jdbc.JdbcFence;
import io.ticketing.jdbc.TokenCommittedException;
import io.ticketing.spring.retry.TicketingTransactional;
import java.sql.SQLException;
import java.util.List;
import java.util.Optional;
import javax.sql.DataSource;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.context.event.ApplicationReadyEvent;
import org.springframework.context.event.EventListener;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.jdbc.datasource.DataSourceUtils;
import org.springframework.stereotype.Component;
import org.springframework.transaction.annotation.Isolation;
import org.springframework.transaction.annotation.Transactional;

/** The orders and payments tables; every write of a payment is fenced. */
@Component
public class OrderStore {
    /** The payment was not recorded because the order was already paid. */
    public static final class AlreadyPaid extends RuntimeException {
        final Order order;

        AlreadyPaid(Order order) {
            super("order already paid");
            this.order = order;
        }
    }

    private final JdbcTemplate jdbc;
    private final DataSource ds;
    private final JdbcFence fence;
    private final String instance;

    public OrderStore(JdbcTemplate jdbc, DataSource ds, @Value("${orders.instance:orders-spring}") String instance) {
        this.jdbc = jdbc;
        this.ds = ds;
        this.instance = instance;
        this.fence = new JdbcFence(JdbcFence.Dialect.POSTGRES);
    }

    /** Creates the tables (instances starting together take turns through an advisory lock). */
    @EventListener(ApplicationReadyEvent.class)
    @Transactional
    public void createSchema() throws SQLException {
        jdbc.queryForList("SELECT pg_advisory_xact_lock(7215)");
        fence.createTable(DataSourceUtils.getConnection(ds));
        jdbc.execute("""
                CREATE TABLE IF NOT EXISTS orders (
                    id text PRIMARY KEY, amount_cents bigint NOT NULL CHECK (amount_cents > 0),
                    status text NOT NULL DEFAULT 'new' CHECK (status IN ('new', 'paid')),
                    paid_by text, paid_token bigint, paid_at timestamptz)""");
        jdbc.execute("""
                CREATE TABLE IF NOT EXISTS payments (
                    id bigserial PRIMARY KEY, order_id text NOT NULL REFERENCES orders (id),
                    amount_cents bigint NOT NULL, instance text NOT NULL, token bigint NOT NULL,
                    created_at timestamptz NOT NULL DEFAULT now())""");
    }

    /** Creates the order; returns true when it was created, false when it existed with that amount. */
    @TicketingTransactional(idempotent = true)
    public Optional<Boolean> create(String id, long amountCents) {
        int n = jdbc.update("INSERT INTO orders (id, amount_cents) VALUES (?, ?) ON CONFLICT (id) DO NOTHING", id, amountCents);
        if (n == 1) {
            return Optional.of(true);
        }
        Order o = get(id).orElseThrow();
        return o.amountCents() == amountCents ? Optional.of(false) : Optional.empty();
    }

    @Transactional(readOnly = true)
    public Optional<Order> get(String id) {
        List<Order> l = jdbc.query("SELECT id, amount_cents, status, paid_by, paid_token FROM orders WHERE id = ?",
                (rs, i) -> new Order(rs.getString(1), rs.getLong(2), rs.getString(3), rs.getString(4),
                        rs.getObject(5) == null ? null : rs.getLong(5)), id);
        return l.stream().findFirst();
    }

    /**
     * Records the payment under the ticket's token, in one fenced transaction:
     * the fence check first, then the reads the write depends on, then the
     * writes. Retried as a whole on conflicts and transient errors, and also
     * when the commit's outcome is unknown (idempotent): a re-run after a
     * commit that did happen meets its own token in the fence
     * (TokenCommittedException) and answers with the order that commit left.
     * Repeatable read: an order changed by another transaction after this
     * one's snapshot is a serialization failure (40001), retried, never a
     * lost update. At most 3 attempts: with the pool's 1 s connection
     * timeout, a database outage is answered (503) within seconds.
     */
    @TicketingTransactional(idempotent = true, isolation = Isolation.REPEATABLE_READ, maxAttempts = 3)
    public Optional<Order> pay(String id, long token) throws SQLException {
        try {
            fence.check(DataSourceUtils.getConnection(ds), "order-" + id, token);
        } catch (TokenCommittedException e) {
            return get(id); // an earlier attempt of this very payment committed
        }
        Optional<Order> o = get(id);
        if (o.isEmpty()) {
            return o;
        }
        if ("paid".equals(o.get().status())) {
            throw new AlreadyPaid(o.get());
        }
        jdbc.update("INSERT INTO payments (order_id, amount_cents, instance, token) VALUES (?, ?, ?, ?)", id, o.get().amountCents(), instance, token);
        jdbc.update("UPDATE orders SET status = 'paid', paid_by = ?, paid_token = ?, paid_at = now() WHERE id = ?", instance, token, id);
        return get(id);
    }
}
