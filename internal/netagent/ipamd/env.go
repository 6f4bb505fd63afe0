package ipamd

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamd/pool"
)

// Knobs are the settings ipamd takes from its environment, under the VPC CNI's names.
type Knobs struct {
	Pool pool.Config
	// Cooldown is IP_COOLDOWN_PERIOD.
	Cooldown time.Duration
	// MTU is POD_MTU, else AWS_VPC_ENI_MTU.
	MTU int
	// VethPrefix is AWS_VPC_K8S_CNI_VETHPREFIX.
	VethPrefix string
	// PluginLogFile is AWS_VPC_K8S_PLUGIN_LOG_FILE (default: plugin.log in --log-dir).
	PluginLogFile string
	// PluginLogLevel is AWS_VPC_K8S_PLUGIN_LOG_LEVEL.
	PluginLogLevel string
	// ClusterName is CLUSTER_NAME, tagged on the ENIs ipamd creates.
	ClusterName string
	// DisableLeakedENICleanup is DISABLE_LEAKED_ENI_CLEANUP.
	DisableLeakedENICleanup bool
}

// KnobsFromEnv reads and checks the knobs, before anything on the host changes, as the
// VPC CNI's validateEnvVars does. Each error names the variable and what it accepts.
func KnobsFromEnv(getenv func(string) string) (Knobs, error) {
	k := Knobs{VethPrefix: "eni", PluginLogLevel: "debug"}
	var err error
	intVar := func(name string, def, lo, hi int) int {
		v := strings.TrimSpace(getenv(name))
		if v == "" || err != nil {
			return def
		}
		n, perr := strconv.Atoi(v)
		if perr != nil || n < lo || n > hi {
			err = fmt.Errorf("environment variable %s=%q: want a whole number from %d to %d", name, v, lo, hi)
			return def
		}
		return n
	}
	k.Pool.WarmENITarget = intVar("WARM_ENI_TARGET", 1, 0, 100)
	k.Pool.WarmIPTarget = intVar("WARM_IP_TARGET", 0, -1, 10000)
	k.Pool.MinimumIPTarget = intVar("MINIMUM_IP_TARGET", 0, -1, 10000)
	k.Pool.MaxENI = intVar("MAX_ENI", -1, -1, 100)
	k.Cooldown = time.Duration(intVar("IP_COOLDOWN_PERIOD", 30, 0, 3600)) * time.Second
	k.MTU = intVar("AWS_VPC_ENI_MTU", 9001, 576, 9001)
	k.MTU = intVar("POD_MTU", k.MTU, 576, 9001)
	if err != nil {
		return Knobs{}, err
	}
	if p, ok := lookup(getenv, "AWS_VPC_K8S_CNI_VETHPREFIX"); ok {
		if len(p) > 4 || p == "" || p == "eth" || p == "lo" || p == "vlan" || strings.ContainsAny(p, "/ \t:") {
			return Knobs{}, fmt.Errorf("environment variable AWS_VPC_K8S_CNI_VETHPREFIX=%q: want 1 to 4 characters, not eth, lo or vlan", p)
		}
		k.VethPrefix = p
	}
	if f, ok := lookup(getenv, "AWS_VPC_K8S_PLUGIN_LOG_FILE"); ok {
		if strings.EqualFold(f, "stdout") {
			return Knobs{}, fmt.Errorf("environment variable AWS_VPC_K8S_PLUGIN_LOG_FILE=stdout: the plugin's standard output carries the CNI protocol; give a file path or stderr")
		}
		k.PluginLogFile = f
	}
	if l, ok := lookup(getenv, "AWS_VPC_K8S_PLUGIN_LOG_LEVEL"); ok {
		k.PluginLogLevel = strings.ToLower(l)
	}
	k.ClusterName = strings.TrimSpace(getenv("CLUSTER_NAME"))
	k.DisableLeakedENICleanup = isTrue(getenv("DISABLE_LEAKED_ENI_CLEANUP"))
	if isTrue(getenv("ENABLE_PREFIX_DELEGATION")) {
		return Knobs{}, fmt.Errorf("environment variable ENABLE_PREFIX_DELEGATION=true: nodejoin-netagent assigns secondary IPs only; unset it")
	}
	if isTrue(getenv("ENABLE_IPv6")) {
		return Knobs{}, fmt.Errorf("environment variable ENABLE_IPv6=true: nodejoin-netagent supports IPv4 only; unset it")
	}
	return k, nil
}

func lookup(getenv func(string) string, name string) (string, bool) {
	v := strings.TrimSpace(getenv(name))
	return v, v != ""
}

func isTrue(v string) bool {
	b, err := strconv.ParseBool(strings.TrimSpace(v))
	return err == nil && b
}
