package io.ticketing.wire;

/**
 * The stable codes of {@code E} frames (docs/protocol.md, "Error codes"). Every
 * {@code E} ends the connection. The test ConstantsTest checks this list
 * against the constants section of testdata/vectors.json.
 */
public final class ErrorCode {
    private ErrorCode() {}

    /** A frame does not match its layout. */
    public static final int MALFORMED_FRAME = 1;
    /** The length prefix exceeds {@link Type#MAX_FRAME}. */
    public static final int FRAME_TOO_LARGE = 2;
    /** A frame type this side does not know. */
    public static final int UNKNOWN_FRAME = 3;
    /** The hello's version is not spoken by the server. */
    public static final int UNSUPPORTED_VERSION = 4;
    /** The hello's token is missing or wrong. */
    public static final int UNAUTHENTICATED = 5;
    /** A request before the hello, or a second hello. */
    public static final int HELLO_REQUIRED = 6;
    /** No hello within the server's deadline. */
    public static final int HELLO_TIMEOUT = 7;
    /** A field is out of range (lease, key length). */
    public static final int INVALID_ARGUMENT = 8;
    /** No pong to the server's ping in time. */
    public static final int PING_TIMEOUT = 9;
    /** The client does not read its answers. */
    public static final int SLOW_CONSUMER = 10;
    /** The server is stopping. */
    public static final int SHUTTING_DOWN = 11;
    /** The server failed; the request's outcome is unknown. */
    public static final int INTERNAL = 12;
    /** A request id already in flight on this connection. */
    public static final int DUPLICATE_ID = 13;
    /** A request this session may not send. */
    public static final int NOT_ALLOWED = 14;
}
