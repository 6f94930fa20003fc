package wire

import "fmt"

// Code is a stable numeric error code carried by E frames. Codes are never
// reused or renumbered; docs/protocol.md lists them.
type Code uint16

const (
	CodeMalformedFrame     Code = 1  // a frame does not match its layout
	CodeFrameTooLarge      Code = 2  // the length prefix exceeds MaxFrame
	CodeUnknownFrame       Code = 3  // a frame type this side does not know
	CodeUnsupportedVersion Code = 4  // the hello's version is not spoken here
	CodeUnauthenticated    Code = 5  // the hello's token is missing or wrong
	CodeHelloRequired      Code = 6  // a request before the hello, or a second hello
	CodeHelloTimeout       Code = 7  // no hello within the server's deadline
	CodeInvalidArgument    Code = 8  // a field is out of range (lease, key length)
	CodePingTimeout        Code = 9  // no pong to the server's ping in time
	CodeSlowConsumer       Code = 10 // the client does not read its answers
	CodeShuttingDown       Code = 11 // the server is stopping
	CodeInternal           Code = 12 // the server failed; the request's outcome is unknown
	CodeDuplicateID        Code = 13 // a request id already in flight on this connection
	CodeNotAllowed         Code = 14 // a request this session may not send
)

var codeNames = map[Code]string{
	CodeMalformedFrame:     "malformed frame",
	CodeFrameTooLarge:      "frame too large",
	CodeUnknownFrame:       "unknown frame type",
	CodeUnsupportedVersion: "unsupported protocol version",
	CodeUnauthenticated:    "unauthenticated",
	CodeHelloRequired:      "hello required",
	CodeHelloTimeout:       "hello timeout",
	CodeInvalidArgument:    "invalid argument",
	CodePingTimeout:        "ping timeout",
	CodeSlowConsumer:       "slow consumer",
	CodeShuttingDown:       "server shutting down",
	CodeInternal:           "internal server error",
	CodeDuplicateID:        "duplicate request id",
	CodeNotAllowed:         "request not allowed",
}

func (c Code) String() string {
	if s, ok := codeNames[c]; ok {
		return s
	}
	return fmt.Sprintf("error code %d", uint16(c))
}

// Error is a protocol error: the E frame's content, or a decoding failure.
type Error struct {
	Code Code
	Msg  string
}

func (e *Error) Error() string { return fmt.Sprintf("%s (code %d): %s", e.Code, uint16(e.Code), e.Msg) }

func errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// Errorf returns an *Error with the given code.
func Errorf(c Code, format string, args ...any) *Error { return errorf(c, format, args...) }
