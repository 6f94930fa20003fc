package server

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/ticketing-io/ticketing/server/internal/node"
)

// The cluster secret's file (raft_secret_file): one secret a line, the
// current one first and, while it is being replaced, the previous one on
// the second line. A server proves every secret of its file to its peers
// and accepts a peer that proves any of them, so a rotation is two rolling
// restarts: every file gets the new secret above the old one, then loses
// the old one.

// ErrRaftSecretFile reports a raft_secret_file that cannot be used.
var ErrRaftSecretFile = errors.New("raft_secret_file unusable")

// MinRaftSecretLen is the shortest secret accepted, in bytes: a secret is
// made by ticketd new-raft-secret, not chosen like a password.
const MinRaftSecretLen = 32

// ReadRaftSecrets reads the secrets of file. The file must be a regular
// file that neither group nor others may access: a secret that other users
// can read lets them claim a member's node id.
func ReadRaftSecrets(file string) ([][]byte, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRaftSecretFile, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrRaftSecretFile, file)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s may be accessed by group or others (mode %04o), who could then claim a member's node id: run chmod 600 %s",
			ErrRaftSecretFile, file, perm, file)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRaftSecretFile, err)
	}
	var secrets [][]byte
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if len(line) < MinRaftSecretLen {
			return nil, fmt.Errorf("%w: line %d of %s is %d bytes long, want at least %d: make a secret with ticketd new-raft-secret FILE",
				ErrRaftSecretFile, i+1, file, len(line), MinRaftSecretLen)
		}
		secrets = append(secrets, line)
	}
	switch {
	case len(secrets) == 0:
		return nil, fmt.Errorf("%w: %s holds no secret: make one with ticketd new-raft-secret FILE", ErrRaftSecretFile, file)
	case len(secrets) > node.MaxRaftSecrets:
		return nil, fmt.Errorf("%w: %s holds %d secrets, at most %d: the current one, and the previous one while it is replaced",
			ErrRaftSecretFile, file, len(secrets), node.MaxRaftSecrets)
	}
	return secrets, nil
}

// NewRaftSecret returns a fresh secret: 32 random bytes in hex.
func NewRaftSecret() string {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("ticketd: no randomness for a secret: %v", err))
	}
	return hex.EncodeToString(b[:])
}

// WriteNewRaftSecret writes a fresh secret to file, mode 0600. Without
// rotate the file must not exist yet; with rotate it must, and the new
// secret goes above its current one, which stays as the previous one.
func WriteNewRaftSecret(file string, rotate bool) error {
	content := NewRaftSecret() + "\n"
	if rotate {
		old, err := ReadRaftSecrets(file)
		if err != nil {
			return err
		}
		content += string(old[0]) + "\n"
	} else if _, err := os.Lstat(file); err == nil {
		return fmt.Errorf("%w: %s exists: to replace the secret of a running cluster use --rotate, which keeps the current one as the previous one", ErrRaftSecretFile, file)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrRaftSecretFile, err)
	}
	// Written beside and renamed into place: a reader sees the old file or
	// the whole new one, never part of a secret.
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".new-*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRaftSecretFile, err)
	}
	defer os.Remove(tmp.Name()) // fails harmlessly once renamed
	err = tmp.Chmod(0o600)
	if err == nil {
		_, err = tmp.WriteString(content)
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && rotate {
		err = os.Rename(tmp.Name(), file)
	} else if err == nil {
		err = os.Link(tmp.Name(), file) // fails if the file appeared meanwhile
	}
	if err != nil {
		return fmt.Errorf("%w: write %s: %w", ErrRaftSecretFile, file, err)
	}
	return nil
}
