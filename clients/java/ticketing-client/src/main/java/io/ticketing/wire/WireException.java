package io.ticketing.wire;

/**
 * A frame that the codec refuses: {@link #code()} is the protocol's error
 * code for it (1 malformed, 2 too large, 3 unknown type).
 */
public final class WireException extends Exception {
    public static final int MALFORMED = 1;
    public static final int TOO_LARGE = 2;
    public static final int UNKNOWN = 3;

    private final int code;

    public WireException(int code, String message) {
        super(message);
        this.code = code;
    }

    /** The protocol error code: 1 malformed, 2 frame too large, 3 unknown frame type. */
    public int code() {
        return code;
    }
}
