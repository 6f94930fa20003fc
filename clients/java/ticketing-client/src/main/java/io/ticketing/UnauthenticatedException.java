package io.ticketing;

/** The server refused the hello's token (E code 5), or the TLS handshake refused the client certificate. Calls made while the refusal persists fail promptly with it; the broker keeps retrying in the background. */
public final class UnauthenticatedException extends TicketingException {
    UnauthenticatedException(String message) {
        super(message, null, 0);
    }

    UnauthenticatedException(String message, Throwable cause, int serverErrorCode) {
        super(message, cause, serverErrorCode);
    }
}
