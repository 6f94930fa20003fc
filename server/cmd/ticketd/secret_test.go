package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ticketing-io/ticketing/server/internal/server"
)

// TestNewRaftSecret: ticketd new-raft-secret writes a fresh secret that
// only its owner may read, never over an existing file; --rotate puts a
// new one above the current one; the result is what raft_secret_file
// reads.
func TestNewRaftSecret(t *testing.T) {
	file := filepath.Join(t.TempDir(), "raft-secret")
	var stdout, stderr bytes.Buffer
	if code := run(t.Context(), []string{"new-raft-secret", file}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	fi, err := os.Stat(file)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v; want mode 0600", file, fi.Mode(), err)
	}
	first, err := server.ReadRaftSecrets(file)
	if err != nil || len(first) != 1 || len(first[0]) < server.MinRaftSecretLen {
		t.Fatalf("read back %q, %v", first, err)
	}
	stderr.Reset()
	if code := run(t.Context(), []string{"new-raft-secret", file}, &stdout, &stderr, nil); code == 0 || !strings.Contains(stderr.String(), "--rotate") {
		t.Fatalf("overwrote an existing secret: exit %d %s", code, stderr.String())
	}
	if code := run(t.Context(), []string{"new-raft-secret", "--rotate", file}, &stdout, &stderr, nil); code != 0 {
		t.Fatalf("rotate: exit %d: %s", code, stderr.String())
	}
	both, err := server.ReadRaftSecrets(file)
	if err != nil || len(both) != 2 || !bytes.Equal(both[1], first[0]) || bytes.Equal(both[0], first[0]) {
		t.Fatalf("after --rotate: %q, %v; want a new secret above %q", both, err, first[0])
	}
	if code := run(t.Context(), []string{"new-raft-secret"}, &stdout, &stderr, nil); code != 2 {
		t.Fatalf("no file: exit %d", code)
	}
}

// TestReadRaftSecretsRefuses: a secret file that others may read, that
// holds no secret, a short one or more than two is refused, naming it.
func TestReadRaftSecretsRefuses(t *testing.T) {
	long := strings.Repeat("s", server.MinRaftSecretLen)
	for _, tc := range []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"group readable", long + "\n", 0o640, "chmod 600"},
		{"others writable", long + "\n", 0o602, "chmod 600"},
		{"empty", "\n\n", 0o600, "holds no secret"},
		{"short", "password\n", 0o600, "want at least 32"},
		{"three", long + "\n" + long + "1\n" + long + "2\n", 0o600, "holds 3 secrets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "s")
			if err := os.WriteFile(file, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(file, tc.mode); err != nil {
				t.Fatal(err)
			}
			_, err := server.ReadRaftSecrets(file)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), file) {
				t.Fatalf("err %v; want one naming %s and saying %q", err, file, tc.want)
			}
		})
	}
}
