package io.ticketing;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.ticketing.spring.retry.RetryClass;
import io.ticketing.spring.retry.RetryClassifier;
import org.junit.jupiter.api.Test;

/** The client's exceptions map to the classes the Go client's errors report. */
class TicketingClassesTest {
    @Test
    void clientExceptions() {
        assertEquals(RetryClass.OVERLOADED, RetryClassifier.classify(new CapacityException("b", CapacityException.HELD)));
        assertEquals(RetryClass.UNDETERMINED, RetryClassifier.classify(new RuntimeException(new IndeterminateException("i", null, 0, false))));
        assertEquals(RetryClass.TRANSPORT_UNAVAILABLE, RetryClassifier.classify(new UnavailableException("u")));
        assertEquals(RetryClass.NON_RETRYABLE, RetryClassifier.classify(new NotAcquiredException("w")));
        assertEquals(RetryClass.NON_RETRYABLE, RetryClassifier.classify(new NotHeldException("n")));
        assertEquals(RetryClass.NON_RETRYABLE, RetryClassifier.classify(new BudgetExceededException("b")));
        assertEquals(RetryClass.INVALID_ARGUMENT, RetryClassifier.classify(new InvalidArgumentException("bad wait")));
        assertEquals(RetryClass.NON_RETRYABLE, RetryClassifier.classify(
                new PermissionDeniedException("f", PermissionDeniedException.KEY, "a")), "a refusal is final");
        assertEquals(RetryClass.NON_RETRYABLE, RetryClassifier.classify(new IndeterminateException("i", null, 0, true)),
                "unknown because the broker was closed: the Go client's ErrClosed wins");
        // a client exception decides even when a retryable SQL error is further down the chain
        assertEquals(RetryClass.NON_RETRYABLE, RetryClassifier.classify(
                new NotAcquiredException("w", new java.sql.SQLException("x", "40001"), 0)));
    }
}
