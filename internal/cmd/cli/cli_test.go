package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/nodejoin/nodejoin/internal/logging"
)

func TestExecuteLoggingFlags(t *testing.T) {
	tests := []struct {
		args       []string
		wantErr    string
		wantStderr []string
		notStderr  []string
	}{
		{args: []string{"hello"}, wantStderr: []string{"level=INFO msg=hello"}, notStderr: []string{"detail"}},
		{args: []string{"hello", "-v", "4"}, wantStderr: []string{"level=INFO msg=hello", "level=DEBUG msg=detail"}},
		{args: []string{"--v=4", "--log-format", "json", "hello"}, wantStderr: []string{`"level":"INFO","msg":"hello"`, `"msg":"detail"`}},
		{args: []string{"hello", "--log-format", "xml"}, wantErr: `--log-format "xml": want text or json`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			root := &cobra.Command{Use: "test"}
			root.AddCommand(&cobra.Command{Use: "hello", RunE: func(cmd *cobra.Command, _ []string) error {
				l := logging.FromContext(cmd.Context())
				l.Info("hello")
				l.Debug("detail")
				return nil
			}})
			var stdout, stderr bytes.Buffer
			err := Execute(context.Background(), root, tt.args, &stdout, &stderr)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr.String())
				}
			}
			for _, w := range tt.notStderr {
				if strings.Contains(stderr.String(), w) {
					t.Errorf("stderr has %q:\n%s", w, stderr.String())
				}
			}
		})
	}
}
