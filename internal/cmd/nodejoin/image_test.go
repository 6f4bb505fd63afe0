package nodejoin

import (
	"bytes"
	"testing"
)

func TestImageCommandsNeedArchivesAndNoArgs(t *testing.T) {
	for _, args := range [][]string{{"image", "load", "--name", "x"}, {"image", "list", "--name", "x", "extra"}, {"image", "list", "-o", "xml"}} {
		var out, errOut bytes.Buffer
		if err := Run(t.Context(), args, &out, &errOut); err == nil {
			t.Errorf("nodejoin %v succeeded, want a usage error", args)
		}
	}
}
