package org.mariadb.jdbc;

import java.sql.SQLException;

/** Stands for the MariaDB driver's exception (the classifier recognizes the driver by its package). */
public class FakeMariaError extends SQLException {
    public FakeMariaError(int code) {
        super("test", "HY000", code);
    }
}
