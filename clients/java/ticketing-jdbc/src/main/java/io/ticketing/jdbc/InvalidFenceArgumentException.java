package io.ticketing.jdbc;

/**
 * A bad argument: a table name that is not an identifier, an empty key (or
 * one over 767 bytes for MySQL), a token of 2^63 or more (negative as a Java
 * long), or a connection in auto-commit mode (not inside a transaction).
 */
public final class InvalidFenceArgumentException extends FenceException {
    InvalidFenceArgumentException(String message) {
        super("fence: invalid argument: " + message);
    }
}
