package nodeadm

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/nodejoin/nodejoin/internal/nodeadm/bootstrap"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// ErrInvalid reports a configuration that failed its checks; the problems were printed.
var ErrInvalid = errors.New("configuration is not valid")

func checkCommand() *cobra.Command {
	var src sourceOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Read, merge and validate the configuration; list every problem with its location",
		Example: `  # The instance's user data, as init reads it
  nodeadm config check

  # A NodeConfig file before it goes into a launch template
  nodeadm config check -c file://nodeconfig.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			loaded, err := newCloud(cmd.ErrOrStderr()).load(cmd.Context(), src.sources)
			if err != nil {
				return err
			}
			printFindings(out, loaded.Findings(), userdata.LevelWarning)
			errs := loaded.Merged.Validate()
			if len(errs) > 0 {
				for _, e := range errs {
					fmt.Fprintf(out, "error: %v\n", e)
				}
				return fmt.Errorf("%w: %d problem(s)", ErrInvalid, len(errs))
			}
			for _, s := range bootstrap.Ignored(loaded.Merged) {
				fmt.Fprintf(out, "warning: %s: %s\n", s.Field, s.Reason)
			}
			_, err = fmt.Fprintf(out, "ok: cluster %s at %s\n", loaded.Merged.Spec.Cluster.Name, loaded.Merged.Spec.Cluster.APIServerEndpoint)
			return err
		},
	}
	src.bind(cmd)
	return cmd
}

// printFindings prints the findings at least as important as min (warning > ignored > info).
func printFindings(w io.Writer, fs []userdata.Finding, min userdata.Level) {
	rank := map[userdata.Level]int{userdata.LevelInfo: 0, userdata.LevelIgnored: 1, userdata.LevelWarning: 2}
	for _, f := range fs {
		if rank[f.Level] >= rank[min] {
			fmt.Fprintf(w, "%s: %s: %s\n", f.Level, f.Part, f.Msg)
		}
	}
}

func dumpCommand() *cobra.Command {
	var (
		src    sourceOptions
		format string
	)
	cmd := &cobra.Command{
		Use:   "dump",
		Short: "Print the merged configuration as a NodeConfig",
		Example: `  # What bootstrap.sh-style or eksctl user data means as a NodeConfig
  nodeadm config dump -c file://user-data.sh

  # User data merged with a drop-in directory, as JSON
  nodeadm config dump -o json -c imds://user-data -c file:///etc/eks/nodeadm.d/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			loaded, err := newCloud(cmd.ErrOrStderr()).load(cmd.Context(), src.sources)
			if err != nil {
				return err
			}
			printFindings(cmd.ErrOrStderr(), loaded.Findings(), userdata.LevelWarning)
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
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	src.bind(cmd)
	cmd.Flags().StringVarP(&format, "output", "o", "yaml", "yaml or json")
	return cmd
}

func explainCommand() *cobra.Command {
	var src sourceOptions
	cmd := &cobra.Command{
		Use:   "explain",
		Short: "Say what each part of the user data is and what nodeadm does with it",
		Example: `  # The instance's user data
  nodeadm userdata explain

  # A MIME multipart file from a launch template
  nodeadm userdata explain -c file://user-data.mime`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			loaded, err := newCloud(cmd.ErrOrStderr()).load(cmd.Context(), src.sources)
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
		},
	}
	src.bind(cmd)
	return cmd
}
