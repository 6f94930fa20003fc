package io.ticketing.spring.retry;

import io.ticketing.TicketingException;
import java.io.EOFException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CancellationException;

/**
 * Maps a failure to its {@link RetryClass} as the Go {@code retry.Classify}
 * does, looking through the whole cause chain, in this order:
 *
 * <ol>
 *   <li>this client's exceptions ({@link TicketingException#retryClass()}: capacity OVERLOADED,
 *       indeterminate UNDETERMINED (NON_RETRYABLE when the broker was closed), unavailable
 *       TRANSPORT_UNAVAILABLE, invalid arguments INVALID_ARGUMENT, the rest, permission denied included,
 *       NON_RETRYABLE);
 *   <li>ticketing-jdbc's fence refusals, a stale token and a token already committed (PRECONDITION_FAILED;
 *       its invalid-argument error stays NON_RETRYABLE, as the Go fence's ErrInvalid);
 *   <li>interruption and cancellation (CANCELED);
 *   <li>MySQL/MariaDB error numbers: 1213 deadlock and 1205 lock wait timeout ABORTED, 1040/1203 too many
 *       connections CLIENT_RESOURCE_EXHAUSTED;
 *   <li>SQLSTATE: 40001 serialization failure, 40P01 deadlock and 55P03 lock not available ABORTED, 53300 too many connections
 *       CLIENT_RESOURCE_EXHAUSTED, 57P01..57P03 shutdown/cannot connect now UNAVAILABLE, class 08
 *       (connection exception) TRANSPORT_UNAVAILABLE;
 *   <li>SQLite SQLITE_BUSY and SQLITE_LOCKED (ABORTED);
 *   <li>a socket timeout (TIMEOUT);
 *   <li>a connection refused at dial time (UNAVAILABLE: nothing was sent, so it is always retried);
 *   <li>a connection that broke mid-call: other socket errors, EOF (CLIENT_TRANSPORT_ERROR).
 * </ol>
 *
 * Everything else is NON_RETRYABLE.
 */
public final class RetryClassifier {
    private RetryClassifier() {}

    /**
     * The class of a failure, from the first rule above that matches its cause chain.
     *
     * @param t the failure
     * @return its class
     */
    public static RetryClass classify(Throwable t) {
        List<Throwable> chain = chain(t);
        for (Throwable e : chain) {
            if (e instanceof TicketingException te) {
                return switch (te.retryClass()) {
                    case OVERLOADED -> RetryClass.OVERLOADED;
                    case UNDETERMINED -> RetryClass.UNDETERMINED;
                    case TRANSPORT_UNAVAILABLE -> RetryClass.TRANSPORT_UNAVAILABLE;
                    case INVALID_ARGUMENT -> RetryClass.INVALID_ARGUMENT;
                    case NOT_RETRYABLE -> RetryClass.NON_RETRYABLE;
                };
            }
        }
        for (Throwable e : chain) {
            // By name, so that this module does not need ticketing-jdbc at run time.
            String n = e.getClass().getName();
            if (n.equals("io.ticketing.jdbc.StaleTokenException") || n.equals("io.ticketing.jdbc.TokenCommittedException")) {
                return RetryClass.PRECONDITION_FAILED;
            }
        }
        for (Throwable e : chain) {
            if (e instanceof InterruptedException || e instanceof CancellationException) {
                return RetryClass.CANCELED;
            }
        }
        for (Throwable e : chain) {
            if (e instanceof SQLException se && !sqlite(se)) {
                switch (se.getErrorCode()) {
                    case 1213, 1205:
                        if (mysql(se)) {
                            return RetryClass.ABORTED;
                        }
                        break;
                    case 1040, 1203:
                        if (mysql(se)) {
                            return RetryClass.CLIENT_RESOURCE_EXHAUSTED;
                        }
                        break;
                    default:
                        break;
                }
            }
        }
        for (Throwable e : chain) {
            if (e instanceof SQLException se && se.getSQLState() != null) {
                String s = se.getSQLState();
                switch (s) {
                    case "40001", "40P01", "55P03": // 55P03 lock_not_available aborts the transaction like a deadlock
                        return RetryClass.ABORTED;
                    case "53300":
                        return RetryClass.CLIENT_RESOURCE_EXHAUSTED;
                    case "57P01", "57P02", "57P03":
                        return RetryClass.UNAVAILABLE;
                    default:
                        if (s.startsWith("08")) {
                            return RetryClass.TRANSPORT_UNAVAILABLE;
                        }
                }
            }
        }
        for (Throwable e : chain) {
            if (e instanceof SQLException se && sqlite(se)) {
                int primary = se.getErrorCode() & 0xff;
                if (primary == 5 || primary == 6) { // SQLITE_BUSY, SQLITE_LOCKED
                    return RetryClass.ABORTED;
                }
            }
        }
        for (Throwable e : chain) {
            if (e instanceof SocketTimeoutException) {
                return RetryClass.TIMEOUT;
            }
        }
        for (Throwable e : chain) {
            if (e instanceof ConnectException) {
                return RetryClass.UNAVAILABLE; // refused at dial time: nothing was sent, nothing applied
            }
        }
        for (Throwable e : chain) {
            if (e instanceof SocketException || e instanceof EOFException) {
                return RetryClass.CLIENT_TRANSPORT_ERROR;
            }
        }
        return RetryClass.NON_RETRYABLE;
    }

    /**
     * Whether a SQLSTATE in the failure's cause chain says the database rolled
     * the whole transaction back: 40001 (serialization failure; also
     * MySQL/MariaDB's deadlock, 1213) or 40P01 (PostgreSQL's deadlock). After
     * either, nothing of the transaction can commit, whatever the application
     * or Spring does next.
     */
    static boolean rolledBackByDatabase(Throwable t) {
        for (Throwable e : chain(t)) {
            if (e instanceof SQLException se && se.getSQLState() != null) {
                switch (se.getSQLState()) {
                    case "40001", "40P01":
                        return true;
                    default:
                        break;
                }
            }
        }
        return false;
    }

    private static boolean sqlite(SQLException e) {
        return e.getClass().getName().startsWith("org.sqlite.");
    }

    /** MySQL and MariaDB drivers (their error numbers mean nothing for other databases). */
    private static boolean mysql(SQLException e) {
        String n = e.getClass().getName();
        return n.startsWith("com.mysql.") || n.startsWith("org.mariadb.");
    }

    private static List<Throwable> chain(Throwable t) {
        List<Throwable> l = new ArrayList<>();
        Map<Throwable, Boolean> seen = new IdentityHashMap<>();
        while (t != null && !seen.containsKey(t) && l.size() < 64) {
            seen.put(t, true);
            l.add(t);
            if (t instanceof SQLException se && se.getNextException() != null && t.getCause() == null) {
                t = se.getNextException();
            } else {
                t = t.getCause();
            }
        }
        return l;
    }
}
