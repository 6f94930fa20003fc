package io.ticketing.jdbc;

import java.sql.SQLException;

/** A throwaway database server a test starts: new empty databases on demand, stopped by close. */
public interface DatabaseServer extends AutoCloseable {
    /** A JDBC URL of a new, empty database on the server. */
    String newDatabase() throws SQLException;
}
