package cli_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/nodejoin/nodejoin/internal/cmd/cli"
	"github.com/nodejoin/nodejoin/internal/cmd/controller"
	"github.com/nodejoin/nodejoin/internal/cmd/nodeadm"
)

// Every command of nodeadm and nodejoin-controller shows examples in its --help.
// cobra's own help and completion commands are not ours.
func TestEveryCommandHasExamples(t *testing.T) {
	tests := []struct {
		name string
		run  cli.RunFunc
		want int // commands, so that a broken walk cannot pass
	}{
		{"nodeadm", nodeadm.Run, 9},
		{"nodejoin-controller", controller.Run, 4},
	}
	for _, tt := range tests {
		name, run, seen := tt.name, tt.run, 0
		var walk func(path []string)
		walk = func(path []string) {
			var out bytes.Buffer
			if err := run(context.Background(), append(append([]string{}, path...), "--help"), &out, &out); err != nil {
				t.Fatalf("%s %s --help: %v", name, strings.Join(path, " "), err)
			}
			help := out.String()
			seen++
			if !strings.Contains(help, "\nExamples:\n  ") {
				t.Errorf("%s %s --help has no Examples section:\n%s", name, strings.Join(path, " "), help)
			}
			for _, sub := range subcommands(help) {
				if sub != "help" && sub != "completion" {
					walk(append(append([]string{}, path...), sub))
				}
			}
		}
		walk(nil)
		if seen < tt.want {
			t.Errorf("%s: walked %d commands, want at least %d", name, seen, tt.want)
		}
	}
}

// subcommands reads the names under "Available Commands:" of a help text.
func subcommands(help string) []string {
	_, rest, ok := strings.Cut(help, "Available Commands:\n")
	if !ok {
		return nil
	}
	var names []string
	for _, line := range strings.Split(rest, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			break
		}
		names = append(names, fields[0])
	}
	return names
}
