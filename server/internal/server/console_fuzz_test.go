package server

import (
	"encoding/base64"
	"net/http"
	"strings"
	"testing"
)

// FuzzConsoleToken: any Authorization header reads as a token or as none,
// without a panic; a basic header gives back the password it encodes and a
// bearer header its token.
func FuzzConsoleToken(f *testing.F) {
	f.Add("Bearer abc")
	f.Add("Basic " + base64.StdEncoding.EncodeToString([]byte("user:secret")))
	f.Add("basic !!!")
	f.Add("")
	f.Add("Bearer")
	f.Fuzz(func(t *testing.T, header string) {
		r, _ := http.NewRequest("GET", "/console/", nil)
		r.Header.Set("Authorization", header)
		_ = consoleToken(r)
		r.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:"+header)))
		if got := consoleToken(r); got != header {
			t.Fatalf("basic password %q read as %q", header, got)
		}
		if tok := strings.TrimSpace(header); tok != "" && !strings.ContainsAny(tok, "\r\n") {
			r.Header.Set("Authorization", "Bearer "+tok)
			if got := consoleToken(r); got != strings.TrimSpace(r.Header.Get("Authorization")[len("Bearer "):]) {
				t.Fatalf("bearer %q read as %q", tok, got)
			}
		}
	})
}
