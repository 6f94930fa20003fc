package node

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/ticketing-io/ticketing/server/internal/fsm"
)

// clusterFile holds the cluster ID in hex, beside MEMBER.
const clusterFile = "CLUSTER"

// ErrClusterMismatch reports a peer, a data directory or a server being
// added that belongs to another cluster.
var ErrClusterMismatch = errors.New("cluster mismatch")

// FormatClusterID renders an ID as hex; the zero ID as "none".
func FormatClusterID(id fsm.ClusterID) string {
	if id == (fsm.ClusterID{}) {
		return "none"
	}
	return hex.EncodeToString(id[:])
}

// NewClusterID returns a random cluster ID.
func NewClusterID() fsm.ClusterID {
	var id fsm.ClusterID
	if _, err := rand.Read(id[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return id
}

func clusterPath(dir string) string { return filepath.Join(dir, clusterFile) }

// incarnationFile holds the data directory's incarnation (16 hex digits).
const incarnationFile = "INCARNATION"

func incarnationPath(dir string) string { return filepath.Join(dir, incarnationFile) }

// newIncarnation returns a random incarnation, never 0 (0 means unknown).
func newIncarnation() uint64 {
	for {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(err) // crypto/rand does not fail on supported systems
		}
		if v := binary.BigEndian.Uint64(b[:]); v != 0 {
			return v
		}
	}
}

// readIncarnationFile returns dir's incarnation, or 0 if there is none.
func readIncarnationFile(dir string) (uint64, error) {
	b, err := os.ReadFile(incarnationPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != 8 || binary.BigEndian.Uint64(raw) == 0 {
		return 0, fmt.Errorf("%s does not hold an incarnation (16 hex digits, not all zero)", incarnationPath(dir))
	}
	return binary.BigEndian.Uint64(raw), nil
}

// writeIncarnationFile replaces dir's INCARNATION file atomically and durably.
func writeIncarnationFile(dir string, inc uint64) error {
	return writeFileSync(dir, incarnationPath(dir), fmt.Sprintf("%016x\n", inc))
}

// readClusterFile returns the ID in dir's CLUSTER file, or zero if there is none.
func readClusterFile(dir string) (fsm.ClusterID, error) {
	var id fsm.ClusterID
	b, err := os.ReadFile(clusterPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return id, nil
	}
	if err != nil {
		return id, err
	}
	raw, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != len(id) {
		return id, fmt.Errorf("%s does not hold a cluster ID (32 hex digits)", clusterPath(dir))
	}
	copy(id[:], raw)
	return id, nil
}

// writeClusterFile replaces dir's CLUSTER file atomically and durably.
func writeClusterFile(dir string, id fsm.ClusterID) error {
	return writeFileSync(dir, clusterPath(dir), FormatClusterID(id)+"\n")
}

// writeFileSync replaces path (in dir) with content: written to a temporary
// file, fsynced, renamed over path, and the directory fsynced.
func writeFileSync(dir, path, content string) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := f.WriteString(content); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}
