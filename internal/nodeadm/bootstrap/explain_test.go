package bootstrap

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
)

// TestExplainGolden checks `nodeadm userdata explain`'s output against golden files
// (testdata/explain/NAME.golden for each input NAME; -update rewrites them).
func TestExplainGolden(t *testing.T) {
	for _, name := range []string{"cfn-signal"} {
		t.Run(name, func(t *testing.T) {
			in := filepath.Join("testdata", "explain", name+".mime")
			var out, progress bytes.Buffer
			if err := Explain(context.Background(), []string{"file://" + in}, &out, &progress); err != nil {
				t.Fatalf("%v\n%s", err, progress.String())
			}
			golden := filepath.Join("testdata", "explain", name+".golden")
			if *update {
				if err := os.WriteFile(golden, out.Bytes(), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update)", err)
			}
			if out.String() != string(want) {
				t.Errorf("explain output differs from %s (run with -update):\n%s", golden, out.String())
			}
		})
	}
}
