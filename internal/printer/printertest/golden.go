// Package printertest compares rendered output with golden files under testdata/.
package printertest

import (
	"flag"
	"os"
	"path/filepath"
	"testing"
)

// Update is -update: rewrite the golden files instead of comparing with them.
var Update = flag.Bool("update", false, "rewrite golden files")

// Golden compares got with testdata/name, or rewrites it with -update.
func Golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *Update {
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (run with -update to accept):\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}
