package io.ticketing;

/** No usable connection to the cluster leader: none could be established in time (nothing was sent), or a read-only request (describe) lost its connection before the answer. */
public sealed class UnavailableException extends TicketingException permits WrongClusterException {
    UnavailableException(String message) {
        super(message, null, 0);
    }

    UnavailableException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }

    @Override
    public RetryClass retryClass() {
        return RetryClass.TRANSPORT_UNAVAILABLE;
    }
}
