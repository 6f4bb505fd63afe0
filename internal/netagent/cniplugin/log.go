package cniplugin

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
)

// openLog returns the plugin's logger for one invocation: slog text lines appended to
// the node's plugin log file. Every process appends whole lines (O_APPEND), so concurrent
// invocations do not interleave within a line. When the file cannot be opened the
// logger writes to fallback (the runtime's log of the plugin's stderr) instead of failing
// the pod. Nothing secret reaches it: the plugin handles no credentials.
func openLog(path, level string, fallback io.Writer) (*slog.Logger, func()) {
	lvl, err := parseLevel(level)
	if err != nil {
		lvl = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: lvl}
	f, err := openAppend(path)
	if err != nil {
		l := slog.New(slog.NewTextHandler(fallback, opts)).With("plugin", PluginType, "pid", os.Getpid())
		l.Warn("plugin log file unavailable; logging to standard error", "path", path, "err", err)
		return l, func() {}
	}
	l := slog.New(slog.NewTextHandler(f, opts)).With("plugin", PluginType, "pid", os.Getpid())
	return l, func() { _ = f.Close() }
}

func openAppend(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil { //nolint:gosec // G301: a log directory, readable by the node's log collectors like the others.
		return nil, fmt.Errorf("plugin log directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644) //nolint:gosec // G302: diagnostics without secrets, readable by log collectors.
	if err != nil {
		return nil, fmt.Errorf("plugin log file: %w", err)
	}
	return f, nil
}
