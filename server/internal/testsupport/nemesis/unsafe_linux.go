package nemesis

import "unsafe"

// unsafePointer is the address of b's first byte (for decoding inotify
// events in place).
func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }
