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
 *       indeterminate UNDETERMINED, unavailable TRANSPORT_UNAVAILABLE, the rest never);
 *   <li>interruption and cancellation (CANCELED);
 *   <li>MySQL/MariaDB error numbers: 1213 deadlock and 1205 lock wait timeout ABORTED, 1040/1203 too many
 *       connections CLIENT_RESOURCE_EXHAUSTED;
 *   <li>SQLSTATE: 40001 serialization failure and 40P01 deadlock ABORTED, 53300 too many connections
 *       CLIENT_RESOURCE_EXHAUSTED, 57P01..57P03 shutdown/cannot connect now UNAVAILABLE, class 08
 *       (connection exception) TRANSPORT_UNAVAILABLE;
 *   <li>SQLite SQLITE_BUSY and SQLITE_LOCKED (ABORTED);
 *   <li>a socket timeout (TIMEOUT);
 *   <li>a refused connection (TRANSPORT_UNAVAILABLE);
 *   <li>a connection that broke mid-call: other socket errors, EOF (CLIENT_TRANSPORT_ERROR).
 * </ol>
 *
 * Everything else, the fence's stale-token errors included, is NON_RETRYABLE.
 */
public final class RetryClassifier {
    private RetryClassifier() {}

    public static RetryClass classify(Throwable t) {
        List<Throwable> chain = chain(t);
        for (Throwable e : chain) {
            if (e instanceof TicketingException te) {
                return switch (te.retryClass()) {
                    case OVERLOADED -> RetryClass.OVERLOADED;
                    case UNDETERMINED -> RetryClass.UNDETERMINED;
                    case TRANSPORT_UNAVAILABLE -> RetryClass.TRANSPORT_UNAVAILABLE;
                    case NOT_RETRYABLE -> RetryClass.NON_RETRYABLE;
                };
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
                    case "40001", "40P01":
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
                return RetryClass.TRANSPORT_UNAVAILABLE;
            }
        }
        for (Throwable e : chain) {
            if (e instanceof SocketException || e instanceof EOFException) {
                return RetryClass.CLIENT_TRANSPORT_ERROR;
            }
        }
        return RetryClass.NON_RETRYABLE;
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
