// Package logging builds the slog logger of nodejoin's binaries from their -v and
// --log-format flags, and routes klog (client-go's logs) into it, so that every line a
// binary writes to its standard error comes through one logger, in one format, filtered
// by one verbosity.
package logging

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"
)

// Formats are the values --log-format accepts.
var Formats = []string{"text", "json"}

// Options are the logging flags.
type Options struct {
	// Verbosity is -v: 0 logs info, warnings and errors; N also logs details of
	// level N and below (klog's V(N), slog levels down to -N: debug is 4).
	Verbosity int
	// Format is --log-format: text or json.
	Format string
}

// Bind adds -v/--v and --log-format to fs.
func (o *Options) Bind(fs *pflag.FlagSet) {
	fs.IntVarP(&o.Verbosity, "v", "v", 0, "log verbosity: 0 logs info, warnings and errors; higher values add detail (4: debug, 6: client-go requests)")
	fs.StringVar(&o.Format, "log-format", "text", "log format on standard error: text or json")
}

// Validate checks the flags' values.
func (o *Options) Validate() error {
	switch o.Format {
	case "text", "json":
	default:
		return fmt.Errorf("--log-format %q: want text or json", o.Format)
	}
	if o.Verbosity < 0 {
		return fmt.Errorf("-v %d: want 0 or more", o.Verbosity)
	}
	return nil
}

// New returns a logger writing to w as the options say. It does not touch klog.
func (o *Options) New(w io.Writer) (*slog.Logger, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	ho := &slog.HandlerOptions{Level: slog.Level(-o.Verbosity)}
	if o.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, ho)), nil
	}
	return slog.New(slog.NewTextHandler(w, ho)), nil
}

// Setup returns the logger New returns and makes it klog's: client-go's messages then go
// through it, V(N) ones only at -v N or more. klog is process-wide state; the last
// Setup wins.
func (o *Options) Setup(w io.Writer) (*slog.Logger, error) {
	l, err := o.New(w)
	if err != nil {
		return nil, err
	}
	RouteKlog(l, o.Verbosity)
	return l, nil
}

// RouteKlog makes l klog's logger, at verbosity v (klog checks its own -v before it
// asks the logger, so both are set).
func RouteKlog(l *slog.Logger, v int) {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	// The flag exists and takes any integer: Set cannot fail.
	_ = fs.Set("v", strconv.Itoa(v))
	klog.SetLoggerWithOptions(Logr(l), klog.ContextualLogger(true))
}

// Logr is l as a logr.Logger, for libraries that take one (klog,
// sigs.k8s.io/controller-runtime/pkg/log.SetLogger): logr's V(N) logs at slog level -N.
func Logr(l *slog.Logger) logr.Logger {
	return logr.FromSlogHandler(l.Handler())
}

type contextKey struct{}

// NewContext returns ctx carrying l.
func NewContext(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, contextKey{}, l)
}

// FromContext returns the logger NewContext stored, else one that discards.
func FromContext(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(contextKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
