package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/userdata"
)

// ErrInvalid reports a configuration that failed its checks; the problems were printed.
var ErrInvalid = errors.New("configuration is not valid")

// Sources say where the configuration comes from, in order, later ones winning.
type Sources struct {
	List []string
}

// AddFlags binds -c, --config-source to s.
func (s *Sources) AddFlags(f *pflag.FlagSet) {
	f.StringArrayVarP(&s.List, "config-source", "c", []string{DefaultSource},
		"where to read configuration, in order, later sources winning: imds://user-data, or file://PATH (a file, or a directory of .yaml/.yml/.json files)")
}

// Check reads, merges and validates the configuration of sources and writes every
// problem to out (`nodeadm config check`). Feature gates are checked against the kubelet
// binary kubelet (a path or a name in PATH; "" is kubelet), when there is one.
func Check(ctx context.Context, sources []string, kubelet string, out, progress io.Writer) error {
	loaded, err := NewCloud(progress).Load(ctx, sources)
	if err != nil {
		return err
	}
	WriteFindings(out, loaded.Findings(), userdata.LevelWarning)
	errs := loaded.Merged.Validate()
	if len(errs) > 0 {
		for _, e := range errs {
			fmt.Fprintf(out, "error: %v\n", e)
		}
		return fmt.Errorf("%w: %d problem(s)", ErrInvalid, len(errs))
	}
	for _, s := range Ignored(loaded.Merged) {
		fmt.Fprintf(out, "warning: %s: %s\n", s.Field, s.Reason)
	}
	WriteFindings(out, GateFindings(ctx, loaded.Merged, kubelet), userdata.LevelInfo)
	_, err = fmt.Fprintf(out, "ok: cluster %s at %s\n", loaded.Merged.Spec.Cluster.Name, loaded.Merged.Spec.Cluster.APIServerEndpoint)
	return err
}

// WriteFindings prints the findings at least as important as min (warning > ignored > info).
func WriteFindings(w io.Writer, fs []userdata.Finding, min userdata.Level) {
	rank := map[userdata.Level]int{userdata.LevelInfo: 0, userdata.LevelIgnored: 1, userdata.LevelWarning: 2}
	for _, f := range fs {
		if rank[f.Level] >= rank[min] {
			fmt.Fprintf(w, "%s: %s: %s\n", f.Level, f.Part, f.Msg)
		}
	}
}

// Dump writes the merged configuration of sources to out as a NodeConfig in format,
// yaml or json (`nodeadm config dump`).
func Dump(ctx context.Context, sources []string, format string, out, progress io.Writer) error {
	loaded, err := NewCloud(progress).Load(ctx, sources)
	if err != nil {
		return err
	}
	WriteFindings(progress, loaded.Findings(), userdata.LevelWarning)
	data, err := json.MarshalIndent(loaded.Merged, "", "  ")
	if err != nil {
		return err
	}
	switch strings.ToLower(format) {
	case "json":
		data = append(data, '\n')
	case "yaml":
		if data, err = sigsyaml.JSONToYAML(data); err != nil {
			return err
		}
	default:
		return fmt.Errorf("--output %q: want yaml or json", format)
	}
	_, err = out.Write(data)
	return err
}

// Explain says what each part of the user data of sources is and what nodeadm does
// with it (`nodeadm userdata explain`).
func Explain(ctx context.Context, sources []string, out, progress io.Writer) error {
	loaded, err := NewCloud(progress).Load(ctx, sources)
	if loaded == nil {
		return err
	}
	for _, r := range loaded.Results {
		d := r.Document
		fmt.Fprintf(out, "%s", d.Source)
		if len(d.Layers) > 0 {
			fmt.Fprintf(out, " (%s)", strings.Join(d.Layers, " → "))
		}
		if d.Multipart {
			fmt.Fprintf(out, ": MIME multipart, %d part(s)", len(d.Parts))
		}
		fmt.Fprintln(out)
		for _, p := range d.Parts {
			ct := p.ContentType
			if ct == "" {
				ct = "no content type"
			}
			fmt.Fprintf(out, "  %s: %s (%s", p.Name(), p.Kind, ct)
			if len(p.Layers) > 0 {
				fmt.Fprintf(out, "; %s", strings.Join(p.Layers, " → "))
			}
			fmt.Fprintf(out, ")\n")
			for _, c := range r.Configs {
				if c.Source == p.Name() {
					fmt.Fprintf(out, "    → NodeConfig for cluster %q, merged in order\n", c.Config.Spec.Cluster.Name)
				}
			}
			for _, f := range r.Findings {
				if f.Part == p.Name() {
					fmt.Fprintf(out, "    %s: %s\n", f.Level, f.Msg)
				}
			}
		}
		for _, f := range r.Findings {
			if d.Multipart && f.Part == d.Source {
				fmt.Fprintf(out, "  %s: %s\n", f.Level, f.Msg)
			}
		}
	}
	return err
}
