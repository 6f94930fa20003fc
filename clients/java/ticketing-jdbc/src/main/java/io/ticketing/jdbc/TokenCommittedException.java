package io.ticketing.jdbc;

/**
 * The key's stored mark is this very token: a transaction fenced with this
 * ticket has already committed on this key, usually an earlier attempt of the
 * same work whose COMMIT reply was lost. Roll back and do not redo the work
 * under a new ticket: it is done; read what was committed and answer from it.
 */
public final class TokenCommittedException extends FenceException {
    /** The fenced key. */
    private final String key;
    /** The token. */
    private final long token;

    TokenCommittedException(String key, long token) {
        super("fence: token " + token + " for key \"" + key + "\" already committed a transaction here (the stored mark is this token): "
                + "an earlier attempt committed; roll back and read its result instead of redoing the work");
        this.key = key;
        this.token = token;
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
     * The token, also the key's stored mark.
     *
     * @return the token
     */
    public long token() {
        return token;
    }
}
