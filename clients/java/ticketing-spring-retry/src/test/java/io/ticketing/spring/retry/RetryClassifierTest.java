package io.ticketing.spring.retry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.EOFException;
import java.net.ConnectException;
import java.net.SocketException;
import java.net.SocketTimeoutException;
import java.sql.SQLException;
import org.junit.jupiter.api.Test;

/** The classification table and the backoff tiers, as in the Go retry package. */
class RetryClassifierTest {
    static RetryClass c(Throwable t) {
        return RetryClassifier.classify(t);
    }

    @Test
    void sqlStatesAndNetworkErrors() {
        assertEquals(RetryClass.ABORTED, c(new RuntimeException("wrapped", new SQLException("x", "40001"))));
        assertEquals(RetryClass.ABORTED, c(new SQLException("x", "40P01")));
        assertEquals(RetryClass.CLIENT_RESOURCE_EXHAUSTED, c(new SQLException("x", "53300")));
        assertEquals(RetryClass.UNAVAILABLE, c(new SQLException("x", "57P01")));
        assertEquals(RetryClass.UNAVAILABLE, c(new SQLException("x", "57P03")));
        assertEquals(RetryClass.TRANSPORT_UNAVAILABLE, c(new SQLException("x", "08006")));
        assertEquals(RetryClass.NON_RETRYABLE, c(new SQLException("x", "23505"))); // unique violation
        assertEquals(RetryClass.NON_RETRYABLE, c(new SQLException("stale token"))); // the fence's errors have no state
        assertEquals(RetryClass.TIMEOUT, c(new RuntimeException(new SocketTimeoutException())));
        assertEquals(RetryClass.UNAVAILABLE, c(new ConnectException("refused")), "refused at dial time: nothing sent, always retried");
        assertEquals(RetryClass.ABORTED, c(new SQLException("x", "55P03")), "lock_timeout");
        assertEquals(RetryClass.PRECONDITION_FAILED, c(io.ticketing.jdbc.FenceErrors.stale()));
        assertEquals(RetryClass.PRECONDITION_FAILED, c(new RuntimeException(io.ticketing.jdbc.FenceErrors.committed())));
        assertEquals(RetryClass.NON_RETRYABLE, c(io.ticketing.jdbc.FenceErrors.invalid()), "the Go fence's ErrInvalid is not classed");
        assertEquals(RetryClass.CLIENT_TRANSPORT_ERROR, c(new SocketException("reset")));
        assertEquals(RetryClass.CLIENT_TRANSPORT_ERROR, c(new EOFException()));
        assertEquals(RetryClass.CANCELED, c(new RuntimeException(new InterruptedException())));
        assertEquals(RetryClass.NON_RETRYABLE, c(new IllegalStateException()));
        assertEquals(RetryClass.ABORTED, c(new org.sqlite.FakeSqliteError(5)));
        assertEquals(RetryClass.ABORTED, c(new org.sqlite.FakeSqliteError(6 + 256)));
        assertEquals(RetryClass.NON_RETRYABLE, c(new org.sqlite.FakeSqliteError(19)));
        assertEquals(RetryClass.ABORTED, c(new org.mariadb.jdbc.FakeMariaError(1213)));
        assertEquals(RetryClass.ABORTED, c(new org.mariadb.jdbc.FakeMariaError(1205)));
        assertEquals(RetryClass.CLIENT_RESOURCE_EXHAUSTED, c(new org.mariadb.jdbc.FakeMariaError(1040)));
        assertEquals(RetryClass.NON_RETRYABLE, c(new SQLException("x", "HY000", 1213)), "MySQL numbers from another driver");
    }

    @Test
    void retriedAndTiers() {
        assertTrue(RetryClass.ABORTED.retryable(false));
        assertTrue(RetryClass.OVERLOADED.retryable(false));
        assertFalse(RetryClass.UNDETERMINED.retryable(false));
        assertTrue(RetryClass.UNDETERMINED.retryable(true));
        assertFalse(RetryClass.TIMEOUT.retryable(true));
        assertFalse(RetryClass.NON_RETRYABLE.retryable(true));
        RetrySettings s = new RetrySettings(true, 10, false, 50, 5000, 5, 500);
        for (int n = 1; n <= 12; n++) {
            long fastCeil = RetrySettings.ceiling(5, 500, n);
            long slowCeil = RetrySettings.ceiling(50, 5000, n);
            long f = s.delayMs(RetryClass.ABORTED, n);
            long sl = s.delayMs(RetryClass.OVERLOADED, n);
            assertTrue(f >= 0 && f < fastCeil, "fast tier: full jitter in [0, ceiling)");
            assertTrue(sl >= slowCeil / 2 && sl < slowCeil, "slow tier: equal jitter in [ceiling/2, ceiling)");
            assertEquals(0, s.delayMs(RetryClass.BAD_SESSION, n));
        }
        assertEquals(5, RetrySettings.ceiling(5, 500, 1));
        assertEquals(40, RetrySettings.ceiling(5, 500, 4));
        assertEquals(500, RetrySettings.ceiling(5, 500, 20));
    }
}
