// Package cniplugin is nodejoin's CNI plugin (nodejoin-cni): it asks ipamd for a VPC
// address over the ipamrpc socket and wires the pod to it the way the VPC CNI does (a
// veth pair, a /32 on the pod's eth0, a default route through the link-local gateway
// 169.254.1.1 with a static ARP entry, a host route and policy rules). This file is the
// plugin's network configuration, shared with ipamd, which renders 10-aws.conflist.
package cniplugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/nodejoin/nodejoin/internal/netagent/ipamrpc"
)

const (
	// PluginType is the plugin's binary name, the "type" in the conflist.
	PluginType = "nodejoin-cni"
	// NetworkName is the conflist's network name, as the VPC CNI names it.
	NetworkName = "aws-cni"
	// ConflistName is the file ipamd writes into the CNI config directory.
	ConflistName = "10-aws.conflist"
	// CNIVersion is the spec version the conflist declares.
	CNIVersion = "1.0.0"

	// DefaultMTU is the pod interface's MTU unless configured (the VPC's jumbo frames).
	DefaultMTU = 9001
	// DefaultVethPrefix starts every host-side veth name, as on EKS.
	DefaultVethPrefix = "eni"
	// DefaultPluginLogFile is where the plugin logs on a node unless configured.
	DefaultPluginLogFile = "/var/log/aws-routed-eni/plugin.log"
	// DefaultPluginLogLevel is the plugin's log level unless configured.
	DefaultPluginLogLevel = "debug"

	// maxVethPrefix keeps prefix + 11 hash characters within IFNAMSIZ-1 (15).
	maxVethPrefix = 4
	minMTU        = 576
	maxMTU        = 9001
)

// NetConf is the plugin's entry in the conflist, as the runtime passes it on stdin
// (with cniVersion, name and, on CHECK and DEL, prevResult injected).
type NetConf struct {
	types.PluginConf

	// MTU is a string, as in the VPC CNI's conflist ("9001").
	MTU string `json:"mtu"`
	// VethPrefix starts the host-side veth names (at most 4 characters).
	VethPrefix string `json:"vethPrefix"`
	// IPAMDSocket is ipamd's Unix socket.
	IPAMDSocket string `json:"ipamdSocket"`
	// PluginLogFile is the plugin's log file on the node.
	PluginLogFile string `json:"pluginLogFile"`
	// PluginLogLevel is debug, info, warn or error.
	PluginLogLevel string `json:"pluginLogLevel"`
}

// ConflistOptions are the knobs of the rendered conflist; zero values take the defaults.
type ConflistOptions struct {
	// IPAMDSocket defaults to ipamrpc.DefaultSocket.
	IPAMDSocket string
	// PluginLogFile defaults to DefaultPluginLogFile.
	PluginLogFile string
	// PluginLogLevel defaults to DefaultPluginLogLevel.
	PluginLogLevel string
	// MTU defaults to DefaultMTU.
	MTU int
	// VethPrefix defaults to DefaultVethPrefix.
	VethPrefix string
}

func (o ConflistOptions) withDefaults() ConflistOptions {
	if o.IPAMDSocket == "" {
		o.IPAMDSocket = ipamrpc.DefaultSocket
	}
	if o.PluginLogFile == "" {
		o.PluginLogFile = DefaultPluginLogFile
	}
	if o.PluginLogLevel == "" {
		o.PluginLogLevel = DefaultPluginLogLevel
	}
	if o.MTU == 0 {
		o.MTU = DefaultMTU
	}
	if o.VethPrefix == "" {
		o.VethPrefix = DefaultVethPrefix
	}
	return o
}

// pluginEntry is the plugin's conflist entry in the order it is written.
type pluginEntry struct {
	Type           string `json:"type"`
	MTU            string `json:"mtu"`
	VethPrefix     string `json:"vethPrefix"`
	IPAMDSocket    string `json:"ipamdSocket"`
	PluginLogFile  string `json:"pluginLogFile"`
	PluginLogLevel string `json:"pluginLogLevel"`
}

type portmapEntry struct {
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

// ConflistJSON renders 10-aws.conflist: this plugin, then portmap for hostPort. The
// output is deterministic and ends in a newline.
func ConflistJSON(opts ConflistOptions) ([]byte, error) {
	o := opts.withDefaults()
	entry := pluginEntry{
		Type:           PluginType,
		MTU:            strconv.Itoa(o.MTU),
		VethPrefix:     o.VethPrefix,
		IPAMDSocket:    o.IPAMDSocket,
		PluginLogFile:  o.PluginLogFile,
		PluginLogLevel: o.PluginLogLevel,
	}
	if err := entry.validate(); err != nil {
		return nil, fmt.Errorf("rendering %s: %w", ConflistName, err)
	}
	out, err := json.MarshalIndent(conflist{
		CNIVersion:   CNIVersion,
		Name:         NetworkName,
		DisableCheck: false,
		Plugins: []any{entry, portmapEntry{
			Type:         "portmap",
			Capabilities: map[string]bool{"portMappings": true},
			SNAT:         true,
		}},
	}, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("rendering %s: %w", ConflistName, err)
	}
	return append(out, '\n'), nil
}

func (e pluginEntry) validate() error {
	mtu, err := strconv.Atoi(e.MTU)
	if err != nil || mtu < minMTU || mtu > maxMTU {
		return fmt.Errorf("mtu %q: want a number from %d to %d", e.MTU, minMTU, maxMTU)
	}
	if len(e.VethPrefix) > maxVethPrefix || e.VethPrefix == "" {
		return fmt.Errorf("vethPrefix %q: want 1 to %d characters (the veth name is the prefix and 11 hash characters)", e.VethPrefix, maxVethPrefix)
	}
	if strings.ContainsAny(e.VethPrefix, "/ \t\n:") {
		return fmt.Errorf("vethPrefix %q: want letters and digits only", e.VethPrefix)
	}
	if !filepath.IsAbs(e.IPAMDSocket) {
		return fmt.Errorf("ipamdSocket %q: want an absolute path such as %s", e.IPAMDSocket, ipamrpc.DefaultSocket)
	}
	if !filepath.IsAbs(e.PluginLogFile) {
		return fmt.Errorf("pluginLogFile %q: want an absolute path such as %s", e.PluginLogFile, DefaultPluginLogFile)
	}
	if _, err := parseLevel(e.PluginLogLevel); err != nil {
		return err
	}
	return nil
}

// LoadNetConf parses the plugin's config from stdin, fills the defaults, checks it and
// parses prevResult when present.
func LoadNetConf(stdin []byte) (*NetConf, error) {
	conf := &NetConf{}
	dec := json.NewDecoder(bytes.NewReader(stdin))
	if err := dec.Decode(conf); err != nil {
		return nil, fmt.Errorf("parsing the %s network config: %w", PluginType, err)
	}
	if conf.MTU == "" {
		conf.MTU = strconv.Itoa(DefaultMTU)
	}
	if conf.VethPrefix == "" {
		conf.VethPrefix = DefaultVethPrefix
	}
	if conf.IPAMDSocket == "" {
		conf.IPAMDSocket = ipamrpc.DefaultSocket
	}
	if conf.PluginLogFile == "" {
		conf.PluginLogFile = DefaultPluginLogFile
	}
	if conf.PluginLogLevel == "" {
		conf.PluginLogLevel = DefaultPluginLogLevel
	}
	entry := pluginEntry{MTU: conf.MTU, VethPrefix: conf.VethPrefix, IPAMDSocket: conf.IPAMDSocket,
		PluginLogFile: conf.PluginLogFile, PluginLogLevel: conf.PluginLogLevel}
	if err := entry.validate(); err != nil {
		return nil, fmt.Errorf("%s network config (in %s, written by ipamd): %w", PluginType, ConflistName, err)
	}
	if conf.RawPrevResult != nil {
		if err := version.ParsePrevResult(&conf.PluginConf); err != nil {
			return nil, fmt.Errorf("parsing prevResult of the %s network config: %w", PluginType, err)
		}
	}
	return conf, nil
}

// MTUValue is the configured MTU as a number (LoadNetConf has checked it).
func (c *NetConf) MTUValue() int {
	mtu, err := strconv.Atoi(c.MTU)
	if err != nil {
		return DefaultMTU
	}
	return mtu
}

// parseLevel reads a pluginLogLevel; the VPC CNI writes "Debug", so case does not matter.
func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("pluginLogLevel %q: want debug, info, warn or error", s)
}
