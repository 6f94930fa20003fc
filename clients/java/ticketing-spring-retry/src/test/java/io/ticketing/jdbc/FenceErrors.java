package io.ticketing.jdbc;

/** The fence's real refusals, built here because their constructors are package-private. */
public final class FenceErrors {
    private FenceErrors() {}

    public static FenceException stale() {
        return new StaleTokenException("k", 5, 7);
    }

    public static FenceException committed() {
        return new TokenCommittedException("k", 5);
    }

    public static FenceException invalid() {
        return new InvalidFenceArgumentException("empty key");
    }
}
