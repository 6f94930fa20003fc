package io.ticketing.jdbc;

/**
 * A newer token has been stored for the key: a later holder of the key has
 * committed a fenced transaction, so this holder's lease is over. Roll back;
 * never retried.
 */
public final class StaleTokenException extends FenceException {
    private final String key;
    private final long token;
    private final long mark;

    StaleTokenException(String key, long token, long mark) {
        super("fence: stale token " + token + " for key \"" + key + "\": stored mark is " + mark
                + " (a newer holder has committed; roll back)");
        this.key = key;
        this.token = token;
        this.mark = mark;
    }

    /** The fenced key. */
    public String key() {
        return key;
    }

    /** The rejected token. */
    public long token() {
        return token;
    }

    /** The key's stored high-water mark, above {@link #token()} (-1 if it could not be read). */
    public long mark() {
        return mark;
    }
}
