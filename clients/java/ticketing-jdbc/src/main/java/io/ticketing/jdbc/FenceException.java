package io.ticketing.jdbc;

import java.sql.SQLException;

/**
 * A fence check that refused the token or its arguments. It is an
 * {@link SQLException} so that JDBC code handles it where it handles the
 * database's own errors; the transaction must be rolled back either way.
 */
public abstract sealed class FenceException extends SQLException
        permits StaleTokenException, TokenCommittedException, InvalidFenceArgumentException {
    FenceException(String message) {
        super(message);
    }
}
