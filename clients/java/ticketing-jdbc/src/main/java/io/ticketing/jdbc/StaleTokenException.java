package io.ticketing.jdbc;

/**
 * A newer token has been stored for the key: a later holder of the key has
 * committed a fenced transaction, so this holder's lease is over. Roll back;
 * never retried.
 */
public final class StaleTokenException extends FenceException {
    /** The fenced key. */
    private final String key;
    /** The rejected token. */
    private final long token;
    /** The stored mark. */
    private final long mark;

    StaleTokenException(String key, long token, long mark) {
        super("fence: stale token " + token + " for key \"" + key + "\": stored mark is " + mark
                + " (a newer holder has committed; roll back)");
        this.key = key;
        this.token = token;
        this.mark = mark;
    }

    /**
     * The fenced key.
     *
     * @return the key
     */
    public String key() {
        return key;
    }

    /**
     * The rejected token.
     *
     * @return the token
     */
    public long token() {
        return token;
    }

    /**
     * The key's stored high-water mark, above {@link #token()} (-1 if it could not be read).
     *
     * @return the mark, or -1
     */
    public long mark() {
        return mark;
    }
}
