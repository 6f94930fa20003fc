package server

import "time"

// SetConsoleCache sets how long the console reuses a view, until the
// returned function puts the old value back.
func SetConsoleCache(d time.Duration) (restore func()) {
	old := consoleCacheFor
	consoleCacheFor = d
	return func() { consoleCacheFor = old }
}
