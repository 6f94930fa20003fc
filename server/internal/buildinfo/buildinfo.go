// Package buildinfo says which build of ticketd is running: its version,
// the VCS commit it was built from and the Go release that built it. The
// same three values appear in the start line, the status answer, the
// console and the ticketing_build_info metric, so that an operator
// mid-upgrade can tell which server runs what.
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// Info describes one build.
type Info struct {
	// Version is the release stamped at build time, else the module
	// version, else "(devel)".
	Version string
	// Commit is the VCS revision (12 hex digits, "-dirty" when the tree
	// had changes), "unknown" when the build recorded none.
	Commit string
	// Go is the Go release that built the binary.
	Go string
}

// Read returns this binary's build. stamped, when not empty, is the
// version given at link time (ticketd's -X main.version).
func Read(stamped string) Info {
	in := Info{Version: stamped, Commit: "unknown", Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		if in.Version == "" {
			in.Version = "(devel)"
		}
		return in
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		in.Commit = rev + dirty
	}
	if in.Version == "" {
		in.Version = bi.Main.Version
		// A build from a checkout has no release: its commit says more than
		// "(devel)" or a pseudo-version.
		if in.Version == "" || in.Version == "(devel)" || strings.HasPrefix(in.Version, "v0.0.0-") {
			in.Version = "(devel)"
			if rev != "" {
				in.Version = in.Commit
			}
		}
	}
	return in
}

// String is the one-line form ticketd --version prints.
func (in Info) String() string {
	return fmt.Sprintf("ticketd %s (commit %s) %s %s/%s", in.Version, in.Commit, in.Go, runtime.GOOS, runtime.GOARCH)
}
