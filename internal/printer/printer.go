// Package printer renders command results in the format of -o: text, or the value as
// JSON or YAML. It also holds the small helpers text renderers share. The text of a
// type lives with the type; this package knows none.
package printer

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"
)

// Format is an output format, the value of -o.
type Format string

// The formats of -o.
const (
	Text Format = "text"
	JSON Format = "json"
	YAML Format = "yaml"
)

// String implements pflag.Value.
func (f *Format) String() string { return string(*f) }

// Set implements pflag.Value.
func (f *Format) Set(s string) error {
	switch Format(s) {
	case Text, JSON, YAML:
		*f = Format(s)
		return nil
	}
	return fmt.Errorf("want %s, %s or %s", Text, JSON, YAML)
}

// Type implements pflag.Value.
func (f *Format) Type() string { return "string" }

// AddFlag binds -o, --output to f, text by default.
func AddFlag(fs *pflag.FlagSet, f *Format) {
	*f = Text
	fs.VarP(f, "output", "o", "output format: text, json or yaml")
}

// Print prints v: as text with text, else as JSON or YAML.
func Print(w io.Writer, f Format, v any, text func(io.Writer)) error {
	if f == Text || f == "" {
		text(w)
		return nil
	}
	return Structured(w, f, v)
}

// Structured prints v as indented JSON, or as YAML.
func Structured(w io.Writer, f Format, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if f == YAML {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", data)
	return err
}

// Table is a tab-aligned writer with two spaces between columns.
func Table(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 0, 2, ' ', 0) }

// Dash is s, or "-" for an empty s.
func Dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Plural counts: "1 node", "2 nodes".
func Plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// Round rounds a duration to tenths of a second.
func Round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }
