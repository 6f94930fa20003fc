package org.sqlite;

import java.sql.SQLException;

/** Stands for the SQLite driver's exception (the classifier recognizes the driver by its package). */
public class FakeSqliteError extends SQLException {
    public FakeSqliteError(int code) {
        super("[SQLITE] test", null, code);
    }
}
