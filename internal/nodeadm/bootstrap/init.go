package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/logging"
	"github.com/nodejoin/nodejoin/internal/nodeadm/nodeconfig/instancetypes"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// InitOptions are the options of `nodeadm init`.
type InitOptions struct {
	Sources        Sources
	root           string
	skip           []string
	daemons        []string
	kubeletVersion string
	kubeletPath    string
	containerdPath string
	manager        string
	bootstrapToken string
	cniBinDir      string
	signal         SignalOptions
}

// AddFlags binds the flags of `nodeadm init` to f.
func (o *InitOptions) AddFlags(f *pflag.FlagSet) {
	o.Sources.AddFlags(f)
	f.StringVar(&o.root, "root", "/", "the node's file system root; paths inside the files point under it too (local instances)")
	f.StringArrayVarP(&o.skip, "skip", "s", nil, "phase to skip: config or run (repeatable)")
	f.StringArrayVarP(&o.daemons, "daemon", "d", nil, "restart only these daemons: containerd, kubelet (repeatable)")
	f.StringVar(&o.kubeletVersion, "kubelet-version", "", "kubelet version such as v1.37.1 (default: ROOT/etc/eks/kubelet-version.txt, else `kubelet --version`)")
	f.StringVar(&o.kubeletPath, "kubelet-path", "", "kubelet binary (default: kubelet in PATH)")
	f.StringVar(&o.containerdPath, "containerd-path", "", "containerd binary (default: containerd in PATH)")
	f.StringVar(&o.manager, "daemon-manager", "", "how daemons run: systemd or process (default: systemd when it runs the host)")
	f.StringVar(&o.bootstrapToken, "bootstrap-token", "", "join with this bootstrap token instead of the credential plugin (also $NODEADM_BOOTSTRAP_TOKEN)")
	f.StringVar(&o.cniBinDir, "cni-bin-dir", "/opt/cni/bin", "where the CNI plugins are installed")
	f.StringVar(&o.signal.Mode, "cfn-signal", SignalWait, "when user data calls cfn-signal: wait (for the Node to be Ready, then signal), detach (save the request for `nodeadm signal`) or off")
	f.DurationVar(&o.signal.Timeout, "cfn-signal-timeout", DefaultSignalTimeout, "how long to wait for the Node to be Ready before signalling FAILURE")
}

func (o *InitOptions) validate() error {
	for _, s := range o.skip {
		if s != "config" && s != "run" {
			return fmt.Errorf("--skip %q: want config or run", s)
		}
	}
	for _, d := range o.daemons {
		if !slices.Contains(Daemons, d) {
			return fmt.Errorf("--daemon %q: want one of %s", d, strings.Join(Daemons, ", "))
		}
	}
	if err := o.signal.validate(); err != nil {
		return err
	}
	if o.manager != "" && o.manager != "systemd" && o.manager != "process" {
		return fmt.Errorf("--daemon-manager %q: want systemd or process", o.manager)
	}
	if o.root == "/" && os.Geteuid() != 0 {
		return fmt.Errorf("%w: nodeadm init configures this host (or give --root for a directory)", ErrNotRoot)
	}
	if o.bootstrapToken == "" {
		o.bootstrapToken = os.Getenv("NODEADM_BOOTSTRAP_TOKEN")
	}
	return nil
}

func step(w io.Writer, what string, fn func() error) error {
	start := time.Now()
	if err := fn(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	fmt.Fprintf(w, "✓ %s (%s)\n", what, time.Since(start).Round(time.Millisecond))
	return nil
}

// Run configures the node and starts its daemons, reporting each step to out. When
// the user data calls cfn-signal, the signal follows (see SignalOptions).
func (o *InitOptions) Run(ctx context.Context, out io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	st := &initState{cloud: NewCloud(out), sources: o.Sources.List}
	err := o.run(ctx, out, st)
	if sigErr := o.signal.after(ctx, o.root, st, err, slices.Contains(o.skip, "run"), out); sigErr != nil {
		return errors.Join(err, sigErr)
	}
	return err
}

// initState is what init learnt, for the signal that follows it.
type initState struct {
	cloud   *Cloud
	sources []string
	loaded  *Loaded
	md      *Metadata
}

func (o *InitOptions) run(ctx context.Context, out io.Writer, st *initState) error {
	c := st.cloud
	var (
		loaded   *Loaded
		md       *Metadata
		rendered *Rendered
	)
	if err := step(out, "configuration loaded", func() error {
		var err error
		loaded, err = c.Load(ctx, o.Sources.List)
		st.loaded = loaded
		if err != nil {
			return err
		}
		WriteFindings(out, loaded.Findings(), userdata.LevelWarning)
		if errs := loaded.Merged.Validate(); len(errs) > 0 {
			if loaded.Incomplete != nil {
				return fmt.Errorf("%w: %w; %w", ErrInvalid, errs.ToAggregate(), loaded.Incomplete)
			}
			return fmt.Errorf("%w: %w", ErrInvalid, errs.ToAggregate())
		}
		warnIgnored(ctx, loaded.Merged)
		return nil
	}); err != nil {
		return err
	}
	if err := step(out, "instance metadata read", func() error {
		var err error
		md, err = c.metadata(ctx)
		st.md = md
		return err
	}); err != nil {
		return err
	}
	if !slices.Contains(o.skip, "config") {
		if err := step(out, "files rendered", func() error {
			var err error
			rendered, err = o.render(ctx, loaded, md, out)
			return err
		}); err != nil {
			return err
		}
		if err := step(out, "files written", func() error {
			res, err := rendered.Files.Write(o.root)
			for _, p := range res.Written {
				fmt.Fprintf(out, "  wrote %s\n", filepath.Join(o.root, p))
			}
			if len(res.Unchanged) > 0 {
				fmt.Fprintf(out, "  %d file(s) already up to date\n", len(res.Unchanged))
			}
			return err
		}); err != nil {
			return err
		}
	}
	if slices.Contains(o.skip, "run") {
		return nil
	}
	mgr := o.daemonManager()
	for _, d := range Daemons {
		if len(o.daemons) > 0 && !slices.Contains(o.daemons, d) {
			continue
		}
		if err := step(out, d+" running", func() error { return mgr.Restart(ctx, d) }); err != nil {
			return err
		}
	}
	return nil
}

// render renders the node's files for the kubelet that will run, whose feature gates
// are checked against it, and prints the warnings.
func (o *InitOptions) render(ctx context.Context, loaded *Loaded, md *Metadata, out io.Writer) (*Rendered, error) {
	version, err := o.detectKubeletVersion(ctx)
	if err != nil {
		return nil, err
	}
	token := o.bootstrapToken
	if token == "" {
		token = loaded.BootstrapToken
	}
	gates := NewKubeletGates(ctx, o.kubeletPath, filepath.Join(o.root, KubeletGatesCachePath))
	rendered, err := Render(loaded.Merged, md, Options{
		Root: o.root, KubeletVersion: version, CPUMillis: onlineCPUMillis(),
		InstanceTypes: instancetypes.Lookup, NodeadmPath: nodeadmPath(),
		BootstrapToken: token, CNIBinDir: o.cniBinDir, KubeletGates: gates,
	})
	if err != nil {
		return nil, err
	}
	if err := gates.CacheErr(); err != nil {
		logging.FromContext(ctx).Warn("kubelet feature gates not cached", "err", err)
	}
	for _, w := range rendered.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	return rendered, nil
}

// warnIgnored logs the settings that validate but that init does not apply yet.
func warnIgnored(ctx context.Context, cfg *v1alpha1.NodeConfig) {
	for _, s := range Ignored(cfg) {
		logging.FromContext(ctx).Warn("setting ignored", "field", s.Field, "reason", s.Reason)
	}
}

func (o *InitOptions) daemonManager() DaemonManager {
	manager := o.manager
	if manager == "" {
		manager = "process"
		if st, err := os.Stat("/run/systemd/system"); err == nil && st.IsDir() && o.root == "/" {
			manager = "systemd"
		}
	}
	if manager == "systemd" {
		return SystemdManager{}
	}
	return ProcessManager{Root: o.root, Binaries: map[string]string{Kubelet: o.kubeletPath, Containerd: o.containerdPath}}
}

var versionRE = regexp.MustCompile(`v?([0-9]+\.[0-9]+\.[0-9]+)`)

// detectKubeletVersion reads the version file the image ships, else asks the kubelet
// (its answer cached under the root's /var/lib/nodeadm).
func (o *InitOptions) detectKubeletVersion(ctx context.Context) (string, error) {
	text := o.kubeletVersion
	if text == "" {
		if data, err := os.ReadFile(filepath.Join(o.root, "etc/eks/kubelet-version.txt")); err == nil {
			text = string(data)
		}
	}
	if text == "" {
		bin := o.kubeletPath
		if bin == "" {
			bin = "kubelet"
		}
		log := logging.FromContext(ctx)
		a, err := KubeletVersion(ctx, bin, filepath.Join(o.root, KubeletVersionCachePath))
		if err != nil {
			return "", fmt.Errorf("finding the kubelet's version (give --kubelet-version): %w", err)
		}
		if a.CacheErr != nil {
			log.Warn("kubelet version not cached", "err", a.CacheErr)
		}
		log.Debug("kubelet version found", "version", strings.TrimSpace(a.Text), "cached", a.Cached)
		text = a.Text
	}
	m := versionRE.FindStringSubmatch(text)
	if m == nil {
		return "", fmt.Errorf("kubelet version %q: want a version such as v1.37.1", strings.TrimSpace(text))
	}
	return "v" + m[1], nil
}

func nodeadmPath() string {
	if exe, err := os.Executable(); err == nil {
		return exe
	}
	return "/usr/bin/nodeadm"
}
