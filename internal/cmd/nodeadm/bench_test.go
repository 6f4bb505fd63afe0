package nodeadm

import (
	"fmt"
	"path/filepath"
	"testing"
)

// BenchmarkInitSkipRun measures `nodeadm init --skip run` (read user data from the IMDS
// emulator, decode, merge, render, write) on seed samples of each format. "fresh"
// writes every file to a new root (each write is fsynced); "unchanged" runs on a root
// that is already right, the path of every boot after the first.
func BenchmarkInitSkipRun(b *testing.B) {
	for _, s := range []string{"000_", "006_", "007_", "010_"} {
		for _, mode := range []string{"fresh", "unchanged"} {
			b.Run(s+mode, func(b *testing.B) {
				cloudFor(b, seed(b, s))
				root := b.TempDir()
				i := 0
				for b.Loop() {
					r := root
					if mode == "fresh" {
						r = filepath.Join(root, fmt.Sprint(i))
						i++
					}
					if out, err := run(b, "init", "--root", r, "--skip", "run", "--kubelet-version", "v1.37.1"); err != nil {
						b.Fatalf("%v\n%s", err, out)
					}
				}
			})
		}
	}
}
