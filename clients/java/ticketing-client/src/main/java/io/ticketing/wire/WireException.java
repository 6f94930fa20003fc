package io.ticketing.wire;

/**
 * A frame that the codec refuses: {@link #code()} is the protocol's error
 * code for it ({@link ErrorCode}: malformed, too large or unknown type).
 */
public final class WireException extends Exception {
    private final int code;

    public WireException(int code, String message) {
        super(message);
        this.code = code;
    }

    /** The protocol error code ({@link ErrorCode#MALFORMED_FRAME}, {@link ErrorCode#FRAME_TOO_LARGE} or {@link ErrorCode#UNKNOWN_FRAME}). */
    public int code() {
        return code;
    }
}
