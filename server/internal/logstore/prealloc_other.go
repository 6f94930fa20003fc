//go:build !linux

package logstore

import "os"

// preallocate does nothing here: segment files grow as they are written.
func preallocate(*os.File, int64) {}
