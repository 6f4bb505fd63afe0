package printer

import (
	"bytes"
	"io"
	"testing"

	"github.com/spf13/pflag"
)

func TestFormatFlag(t *testing.T) {
	var f Format
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	AddFlag(fs, &f)
	if f != Text {
		t.Errorf("default = %q, want text", f)
	}
	if err := fs.Parse([]string{"-o", "yaml"}); err != nil || f != YAML {
		t.Errorf("-o yaml: %q, %v", f, err)
	}
	if err := fs.Parse([]string{"-o", "xml"}); err == nil {
		t.Error("-o xml was accepted")
	}
}

func TestPrint(t *testing.T) {
	v := map[string]int{"a": 1}
	for f, want := range map[Format]string{Text: "text\n", JSON: "{\n  \"a\": 1\n}\n", YAML: "a: 1\n"} {
		var b bytes.Buffer
		if err := Print(&b, f, v, func(w io.Writer) { _, _ = io.WriteString(w, "text\n") }); err != nil || b.String() != want {
			t.Errorf("%s: %q, %v; want %q", f, b.String(), err, want)
		}
	}
}
