package io.ticketing;

import java.lang.System.Logger.Level;
import java.util.function.Consumer;
import org.jspecify.annotations.Nullable;

/**
 * Where the broker reports what it does: the log (every collaborator logs
 * under the broker's logger name), the {@link BrokerListener} for metrics and
 * the {@link TicketBroker.ReleaseObserver} for background releases. A
 * listener or observer that throws is logged, never lets its failure reach
 * the client's own threads.
 */
final class Reporter {
    /** The broker's logger: its name is what applications configure. */
    static final System.Logger LOG = System.getLogger(TicketBroker.class.getName());

    private final Config cfg;

    Reporter(Config cfg) {
        this.cfg = cfg;
    }

    /** Calls the listener, if any; its failures are logged, never thrown. */
    void tell(Consumer<BrokerListener> event) {
        BrokerListener l = cfg.listener;
        if (l == null) {
            return;
        }
        try {
            event.accept(l);
        } catch (RuntimeException e) {
            LOG.log(Level.WARNING, "ticketing: broker listener threw", e);
        }
    }

    /** A background release of key's token ended: err is null when the server answered R. */
    void backgroundRelease(String key, long token, @Nullable TicketingException err) {
        if (err != null) {
            LOG.log(Level.WARNING, "ticketing: background release failed: {0}", err.getMessage());
        }
        tell(l -> l.backgroundReleaseFinished(err));
        TicketBroker.ReleaseObserver o = cfg.observer;
        if (o != null) {
            try {
                o.released(key, token, err);
            } catch (RuntimeException e) {
                LOG.log(Level.WARNING, "ticketing: release observer threw", e);
            }
        }
    }
}
