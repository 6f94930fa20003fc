package faketicketd

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every scenario of the suite loads; a malformed one is refused with a
// message naming its file and what is wrong, so a typo never silently
// weakens a scenario.
func TestLoadScenarios(t *testing.T) {
	scs, err := LoadScenarios("../../testdata/conformance")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"../../testdata/conformance/coordination", "../../testdata/conformance/coordination/pending"} {
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) && strings.HasSuffix(dir, "pending") {
			continue // no rule is pending today
		}
		more, err := LoadScenarios(dir)
		if err != nil {
			t.Fatal(err)
		}
		scs = append(scs, more...)
	}
	names := map[string]bool{}
	for _, sc := range scs {
		if names[sc.Name] {
			t.Errorf("scenario name %q twice", sc.Name)
		}
		names[sc.Name] = true
	}

	dir := t.TempDir()
	for _, c := range []struct{ name, json, want string }{
		{"unknown field", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"describe","expect":{"result":"free"}}],"sent":{"mustnot":["A"]}}`, "unknown field"},
		{"two actions", `{"name":"x","rule":"r","connections":[[{"cut":true,"stall":true}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "exactly one thing"},
		{"no action", `{"name":"x","rule":"r","connections":[[{}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "exactly one thing"},
		{"unknown op", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"grab","expect":{"result":"free"}}]}`, "unknown op"},
		{"no expectation", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"describe","expect":{}}]}`, "expect a result or an error"},
		{"bad token", `{"name":"x","rule":"r","connections":[[{"send":"G","token":"-1"}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "token"},
		{"trickle without send", `{"name":"x","rule":"r","connections":[[{"cut":true,"trickle_ms":100}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "trickle_ms"},
		{"negative trickle", `{"name":"x","rule":"r","connections":[[{"send":"G","trickle_ms":-1}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "trickle_ms"},
		{"bad raw", `{"name":"x","rule":"r","connections":[[{"raw":"zz"}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "raw"},
		{"await of nothing", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"await","call":"a","expect":{"result":"free"}}]}`, "no earlier background call"},
		{"background with expect", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"describe","background":"a","expect":{"result":"free"}}]}`, "checked by its await step"},
		{"release_token without token", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"release_token","key":"k","expect":{"result":"released"}}]}`, "needs a token"},
		{"accepted per server", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"describe","expect":{"result":"free"}}],"sent":{"accepted":[1,2]}}`, "one count per server"},
		{"address of no server", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"options":{"addresses":[3]},"client":[{"op":"describe","expect":{"result":"free"}}]}`, "no server 3"},
		{"unknown coordination op", `{"name":"x","rule":"r","connections":[[{"read":"K","op":"grab"}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "unknown coordination op"},
		{"op on a ticket frame", `{"name":"x","rule":"r","connections":[[{"read":"A","op":"attach"}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "K read or a T send"},
		{"unknown status", `{"name":"x","rule":"r","connections":[[{"send":"T","op":"attach","status":10}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "not a coordination status"},
		{"unknown counted op", `{"name":"x","rule":"r","connections":[[{"cut":true}]],"client":[{"op":"describe","expect":{"result":"free"}}],"sent":{"coord_count":{"grab":1}}}`, "unknown coordination op"},
		{"no rule", `{"name":"x","connections":[[{"cut":true}]],"client":[{"op":"describe","expect":{"result":"free"}}]}`, "rule"},
	} {
		p := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".json")
		if err := os.WriteFile(p, []byte(c.json), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := LoadScenario(p)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), p) {
			t.Errorf("%s: got %v, want an error naming %s and saying %q", c.name, err, p, c.want)
		}
	}
}
