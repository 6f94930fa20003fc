package io.ticketing;

/**
 * A release whose first answer was lost (the connection ended after it was sent) was sent again with the same token
 * and answered N. The hold has ended, but the earlier attempt may be what ended it, so unlike a plain
 * {@link NotHeldException} this does not mean the ticket had already expired or been released before. It is a
 * {@link NotHeldException}, so a {@code catch (NotHeldException e)} also catches it; catch this class first to tell
 * the two apart (the Go client's {@code ErrNotHeldAfterRetry}).
 */
public final class NotHeldAfterRetryException extends NotHeldException {
    NotHeldAfterRetryException(String message) {
        super(message);
    }
}
