//go:build !linux

package node

// dirLocation: copied directories are detected on Linux only.
func dirLocation(string) (string, bool, error) { return "", false, nil }
