package ipamd

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/nodejoin/nodejoin/internal/atomicfile"
)

// ConflistName is the CNI configuration ipamd writes once it is ready. The "10-" prefix
// makes it the first configuration a runtime picks.
const ConflistName = "10-aws.conflist"

// ConflistOptions are what the conflist says about this node's ipamd and plugin.
type ConflistOptions struct {
	IPAMDSocket    string
	PluginLogFile  string
	PluginLogLevel string
	MTU            int
	VethPrefix     string
}

// renderConflist renders 10-aws.conflist as NET-DESIGN.md gives it: the nodejoin-cni
// plugin, then portmap. The CNI plugin's package (internal/netagent/cniplugin, helper
// cni) owns the plugin's configuration struct and will render it once it is on main;
// this is the only function that changes then.
func renderConflist(o ConflistOptions) ([]byte, error) {
	type plugin struct {
		Type           string `json:"type"`
		MTU            string `json:"mtu"`
		VethPrefix     string `json:"vethPrefix"`
		IPAMDSocket    string `json:"ipamdSocket"`
		PluginLogFile  string `json:"pluginLogFile"`
		PluginLogLevel string `json:"pluginLogLevel"`
	}
	type portmap struct {
		Type         string          `json:"type"`
		Capabilities map[string]bool `json:"capabilities"`
		SNAT         bool            `json:"snat"`
	}
	type conflist struct {
		CNIVersion   string `json:"cniVersion"`
		Name         string `json:"name"`
		DisableCheck bool   `json:"disableCheck"`
		Plugins      []any  `json:"plugins"`
	}
	if o.IPAMDSocket == "" || o.PluginLogFile == "" || o.MTU == 0 || o.VethPrefix == "" {
		return nil, fmt.Errorf("rendering %s: socket, plugin log file, MTU and veth prefix are required", ConflistName)
	}
	b, err := json.MarshalIndent(conflist{
		CNIVersion: "1.0.0", Name: "aws-cni",
		Plugins: []any{
			plugin{Type: "nodejoin-cni", MTU: strconv.Itoa(o.MTU), VethPrefix: o.VethPrefix, IPAMDSocket: o.IPAMDSocket, PluginLogFile: o.PluginLogFile, PluginLogLevel: o.PluginLogLevel},
			portmap{Type: "portmap", Capabilities: map[string]bool{"portMappings": true}, SNAT: true},
		},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", ConflistName, err)
	}
	return append(b, '\n'), nil
}

// writeConflist writes the conflist into dir atomically (the runtime's directory watcher
// never sees half a file).
func writeConflist(dir string, o ConflistOptions) error {
	b, err := renderConflist(o)
	if err != nil {
		return err
	}
	//nolint:gosec // G306: the runtime reads CNI configuration as any user; it holds no secret.
	if err := atomicfile.WriteFile(filepath.Join(dir, ConflistName), b, 0o644); err != nil {
		return fmt.Errorf("writing the CNI configuration: %w", err)
	}
	return nil
}

// removeConflist removes the conflist, so the runtime reports the node's network as not
// ready while ipamd is not serving.
func removeConflist(dir string) error {
	if err := os.Remove(filepath.Join(dir, ConflistName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing the CNI configuration: %w", err)
	}
	return nil
}
