package bootstrap

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/atomicfile"
	"github.com/nodejoin/nodejoin/internal/userdata"
)

// KubeletGatesCachePath is where nodeadm remembers what the kubelet said of each feature
// gate setting, as a path on the node, for the same binary (path, size, modification time).
const KubeletGatesCachePath = "/var/lib/nodeadm/kubelet-feature-gates.json"

// removedGates says when upstream removed well-known kubelet feature gates, only to make
// the warning more precise: whether a gate is known is always the kubelet's answer.
// Sources: the feature-gates-removed page of kubernetes.io and the removing pull requests
// (kubernetes/kubernetes#130162 for the two cloud-provider gates).
var removedGates = map[string]string{
	"DisableKubeletCloudCredentialProviders": "v1.33",
	"DisableCloudProviders":                  "v1.33",
	"KubeletCredentialProviders":             "v1.28",
}

// GateVerdict is what a kubelet says of one feature gate setting.
type GateVerdict struct {
	// Accepted says the kubelet takes the setting.
	Accepted bool `json:"accepted"`
	// Unknown says the kubelet does not know the gate at all.
	Unknown bool `json:"unknown,omitempty"`
	// Refusal is the kubelet's own words when it refuses, such as "cannot set feature
	// gate DynamicResourceAllocation to false, feature is locked to true".
	Refusal string `json:"refusal,omitempty"`
}

// GateChecker says whether the kubelet that will run accepts a feature gate setting. An
// error means the kubelet could not be asked.
type GateChecker interface {
	CheckGate(gate string, value bool) (GateVerdict, error)
}

// KubeletGates asks a kubelet binary about feature gate settings, and caches the answers.
//
// `kubelet --help` cannot answer: it lists only alpha and beta gates, not the GA and
// deprecated ones a kubelet still accepts (v1.37.1 lists neither RotateKubeletServerCertificate
// nor DynamicResourceAllocation). So the kubelet is asked the way it checks gates at start:
// `kubelet --feature-gates=GATE=VALUE --node-labels=kubernetes.io/nodeadm-gate-probe=x`. The
// kubelet applies the gates, then refuses the label (a reserved prefix) and exits before
// doing anything; an unknown gate or a locked gate set against its lock fails first, with
// the kubelet's own message. One run takes about 35 ms; answers are cached per binary.
type KubeletGates struct {
	ctx       context.Context
	bin       string
	cacheFile string
	timeout   time.Duration

	once     sync.Once
	mu       sync.Mutex
	cache    gatesCache
	findErr  error
	cacheErr error
}

type gatesCache struct {
	Path     string                 `json:"path"`
	Size     int64                  `json:"size"`
	ModTime  int64                  `json:"modTimeUnixNano"`
	Verdicts map[string]GateVerdict `json:"verdicts"`
}

// NewKubeletGates asks bin (a path, or a name in PATH) and records its answers in
// cacheFile ("" records nothing).
func NewKubeletGates(ctx context.Context, bin, cacheFile string) *KubeletGates {
	if bin == "" {
		bin = "kubelet"
	}
	return &KubeletGates{ctx: ctx, bin: bin, cacheFile: cacheFile, timeout: 10 * time.Second}
}

// CacheErr is the last failure to record an answer; the answers are still good.
func (k *KubeletGates) CacheErr() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.cacheErr
}

func (k *KubeletGates) load() {
	path, err := exec.LookPath(k.bin)
	if err != nil {
		k.findErr = fmt.Errorf("finding the kubelet %s (give --kubelet-path): %w", k.bin, err)
		return
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	st, err := os.Stat(path)
	if err != nil {
		k.findErr = fmt.Errorf("finding the kubelet %s: %w", k.bin, err)
		return
	}
	k.cache = gatesCache{Path: path, Size: st.Size(), ModTime: st.ModTime().UnixNano(), Verdicts: map[string]GateVerdict{}}
	if k.cacheFile == "" {
		return
	}
	data, err := os.ReadFile(k.cacheFile)
	if err != nil {
		return
	}
	var c gatesCache
	if json.Unmarshal(data, &c) == nil && c.Path == k.cache.Path && c.Size == k.cache.Size && c.ModTime == k.cache.ModTime && c.Verdicts != nil {
		k.cache.Verdicts = c.Verdicts
	}
}

// CheckGate returns the kubelet's verdict on gate=value, from the cache when this binary
// was asked before.
func (k *KubeletGates) CheckGate(gate string, value bool) (GateVerdict, error) {
	k.once.Do(k.load)
	if k.findErr != nil {
		return GateVerdict{}, k.findErr
	}
	key := gate + "=" + strconv.FormatBool(value)
	k.mu.Lock()
	v, ok := k.cache.Verdicts[key]
	k.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := k.probe(gate, value)
	if err != nil {
		return GateVerdict{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cache.Verdicts[key] = v
	if k.cacheFile != "" {
		data, err := json.Marshal(k.cache)
		if err == nil {
			err = atomicfile.WriteFile(k.cacheFile, append(data, '\n'), 0o644)
		}
		if err != nil {
			k.cacheErr = fmt.Errorf("recording the kubelet's feature gates in %s: %w", k.cacheFile, err)
		}
	}
	return v, nil
}

// gateProbeLabel is a node label in a prefix the kubelet reserves: it refuses it right
// after applying the feature gates, before it starts anything.
const gateProbeLabel = "kubernetes.io/nodeadm-gate-probe=x"

func (k *KubeletGates) probe(gate string, value bool) (GateVerdict, error) {
	ctx, cancel := context.WithTimeout(k.ctx, k.timeout)
	defer cancel()
	setting := gate + "=" + strconv.FormatBool(value)
	cmd := exec.CommandContext(ctx, k.cache.Path, "--feature-gates="+setting, "--node-labels="+gateProbeLabel)
	out, err := cmd.CombinedOutput()
	text := string(out)
	switch {
	case strings.Contains(text, "unrecognized feature gate: "+gate):
		return GateVerdict{Unknown: true, Refusal: "unrecognized feature gate: " + gate}, nil
	case strings.Contains(text, "cannot set feature gate "+gate+" "):
		return GateVerdict{Refusal: refusalLine(text, "cannot set feature gate "+gate+" ")}, nil
	case strings.Contains(text, "nodeadm-gate-probe"):
		return GateVerdict{Accepted: true}, nil
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	if err == nil {
		err = errors.New("it exited without refusing the probe label")
	}
	return GateVerdict{}, fmt.Errorf("asking %s about feature gate %s: %w; its output: %s", k.cache.Path, setting, err, excerpt(text))
}

// refusalLine returns the kubelet's message from marker to the end of its line, without
// klog's closing quote.
func refusalLine(text, marker string) string {
	_, rest, _ := strings.Cut(text, marker)
	line, _, _ := strings.Cut(rest, "\n")
	return marker + strings.TrimRight(line, `" >`)
}

func excerpt(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	if s == "" {
		return "(none)"
	}
	return s
}

// GateDrop says why gate=value is dropped, naming the kubelet's version when known:
// "kubelet v1.37.1 does not know feature gate X (removed upstream in v1.33); dropped".
func GateDrop(version, gate string, value bool, v GateVerdict) string {
	who := "the kubelet"
	if version != "" {
		who = "kubelet " + version
	}
	if v.Unknown {
		why := "removed upstream, not yet added, or misspelled"
		if at, ok := removedGates[gate]; ok {
			why = "removed upstream in " + at
		}
		return fmt.Sprintf("%s does not know feature gate %s (%s); dropped", who, gate, why)
	}
	return fmt.Sprintf("%s refuses feature gate %s=%t (%s); dropped", who, gate, value, v.Refusal)
}

// gateFilter checks feature gates against a GateChecker and drops those it refuses.
type gateFilter struct {
	checker GateChecker
	version string
	// unaskable is set once the kubelet could not be asked, so it is said once.
	unaskable error
}

// refused asks about each gate in name order and returns the gates the kubelet refuses,
// with its verdicts. An error says the kubelet could not be asked: gates from then on are
// unchecked.
func (f *gateFilter) refused(gates map[string]bool) ([]string, map[string]GateVerdict, error) {
	if f.unaskable != nil {
		return nil, nil, f.unaskable
	}
	var names []string
	verdicts := map[string]GateVerdict{}
	for _, g := range sortedKeys(gates) {
		v, err := f.checker.CheckGate(g, gates[g])
		if err != nil {
			f.unaskable = err
			return names, verdicts, err
		}
		if !v.Accepted {
			names = append(names, g)
			verdicts[g] = v
		}
	}
	return names, verdicts, nil
}

// filter removes from gates every setting the kubelet refuses and returns one message
// per dropped gate, and one saying the kubelet could not be asked (the gates left are
// kept). where names the gates' origin for the messages.
func (f *gateFilter) filter(where string, gates map[string]bool) []string {
	if f.checker == nil || len(gates) == 0 {
		return nil
	}
	names, verdicts, err := f.refused(gates)
	var msgs []string
	for _, g := range names {
		msgs = append(msgs, GateDrop(f.version, g, gates[g], verdicts[g])+" from "+where)
		delete(gates, g)
	}
	if err != nil {
		msgs = append(msgs, fmt.Sprintf("feature gates not checked against the kubelet, kept as written (%s: %s): %v", where, strings.Join(sortedKeys(gates), ", "), err))
	}
	return msgs
}

// GateFindings checks spec.kubelet.config.featureGates against the kubelet bin (a path,
// or a name in PATH; "" is kubelet) for `nodeadm config check`: a warning per gate the
// kubelet refuses, which init would drop, or a note that no kubelet could be asked.
func GateFindings(ctx context.Context, cfg *v1alpha1.NodeConfig, bin string) []userdata.Finding {
	const part = "spec.kubelet.config.featureGates"
	gates, ok := userGates(cfg.Spec.Kubelet.Config["featureGates"])
	if !ok || len(gates) == 0 {
		return nil
	}
	if bin == "" {
		bin = "kubelet"
	}
	f := &gateFilter{checker: NewKubeletGates(ctx, bin, "")}
	names, verdicts, err := f.refused(gates)
	if len(names) > 0 || err == nil {
		// Only a kubelet that answered is asked its version, for the messages.
		if a, verr := KubeletVersion(ctx, bin, ""); verr == nil {
			if m := versionRE.FindStringSubmatch(a.Text); m != nil {
				f.version = "v" + m[1]
			}
		}
	}
	var out []userdata.Finding
	for _, g := range names {
		msg := strings.TrimSuffix(GateDrop(f.version, g, gates[g], verdicts[g]), "; dropped") + "; nodeadm init drops it"
		out = append(out, userdata.Finding{Part: part, Level: userdata.LevelWarning, Msg: msg})
	}
	if err != nil {
		out = append(out, userdata.Finding{Part: part, Level: userdata.LevelInfo, Msg: fmt.Sprintf(
			"not checked against a kubelet (%v); nodeadm init checks them against the node's kubelet and drops those it refuses", err)})
	}
	return out
}

// userGates decodes spec.kubelet.config.featureGates; ok is false when the field is
// absent or not an object of booleans (left to the kubelet's own check).
func userGates(raw json.RawMessage) (map[string]bool, bool) {
	if len(raw) == 0 {
		return nil, false
	}
	var gates map[string]bool
	if err := json.Unmarshal(raw, &gates); err != nil || gates == nil {
		return nil, false
	}
	return gates, true
}
