package cniplugin

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func TestConflistGolden(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts ConflistOptions
	}{
		{"default", ConflistOptions{}},
		{"sandbox-paths", ConflistOptions{
			IPAMDSocket:    "/var/lib/nodejoin/c1/nodes/n1/var/run/aws-node/ipamd.sock",
			PluginLogFile:  "/var/lib/nodejoin/c1/nodes/n1/var/log/aws-routed-eni/plugin.log",
			PluginLogLevel: "info",
			MTU:            1500,
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConflistJSON(tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", tc.name+".conflist")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run go test ./internal/netagent/cniplugin -run TestConflistGolden -update)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs:\n%s\nrun go test ./internal/netagent/cniplugin -run TestConflistGolden -update and review the diff", path, got)
			}
		})
	}
}

// The rendered conflist is what a runtime loads, and each plugin entry, with the
// runtime's injected keys, is what this plugin's LoadNetConf accepts.
func TestConflistRoundTrip(t *testing.T) {
	raw, err := ConflistJSON(ConflistOptions{IPAMDSocket: "/run/x/ipamd.sock", MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	list, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatalf("libcni rejects the conflist: %v", err)
	}
	if list.Name != NetworkName || list.CNIVersion != CNIVersion || list.DisableCheck || len(list.Plugins) != 2 {
		t.Fatalf("conflist = %+v", list)
	}
	if list.Plugins[0].Network.Type != PluginType || list.Plugins[1].Network.Type != "portmap" {
		t.Fatalf("plugin types %q, %q", list.Plugins[0].Network.Type, list.Plugins[1].Network.Type)
	}
	var entry map[string]any
	if err := json.Unmarshal(list.Plugins[0].Bytes, &entry); err != nil {
		t.Fatal(err)
	}
	entry["cniVersion"], entry["name"] = list.CNIVersion, list.Name
	stdin, err := json.Marshal(entry)
	if err != nil {
		t.Fatal(err)
	}
	conf, err := LoadNetConf(stdin)
	if err != nil {
		t.Fatal(err)
	}
	if conf.IPAMDSocket != "/run/x/ipamd.sock" || conf.MTUValue() != 1500 || conf.VethPrefix != DefaultVethPrefix ||
		conf.PluginLogFile != DefaultPluginLogFile || conf.Name != NetworkName || conf.CNIVersion != CNIVersion {
		t.Fatalf("LoadNetConf = %+v", conf)
	}
}

func TestConflistRefusesBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts ConflistOptions
		want string
	}{
		{"long prefix", ConflistOptions{VethPrefix: "abcde"}, "vethPrefix"},
		{"mtu too big", ConflistOptions{MTU: 9216}, "mtu"},
		{"mtu too small", ConflistOptions{MTU: 68}, "mtu"},
		{"relative socket", ConflistOptions{IPAMDSocket: "ipamd.sock"}, "ipamdSocket"},
		{"relative log", ConflistOptions{PluginLogFile: "plugin.log"}, "pluginLogFile"},
		{"bad level", ConflistOptions{PluginLogLevel: "loud"}, "pluginLogLevel"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ConflistJSON(tc.opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestLoadNetConf(t *testing.T) {
	for _, tc := range []struct {
		name, in, wantErr string
	}{
		{"defaults", `{"cniVersion":"1.0.0","name":"aws-cni","type":"nodejoin-cni"}`, ""},
		{"vpc cni level case", `{"cniVersion":"1.0.0","name":"aws-cni","type":"nodejoin-cni","pluginLogLevel":"Debug"}`, ""},
		{"not json", `{`, "parsing"},
		{"bad mtu", `{"cniVersion":"1.0.0","name":"aws-cni","type":"nodejoin-cni","mtu":"jumbo"}`, "mtu"},
		{"prev result", `{"cniVersion":"1.0.0","name":"aws-cni","type":"nodejoin-cni","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"198.18.1.5/32"}]}}`, ""},
		{"bad prev result", `{"cniVersion":"1.0.0","name":"aws-cni","type":"nodejoin-cni","prevResult":{"cniVersion":"1.0.0","ips":[{"address":"nope"}]}}`, "prevResult"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			conf, err := LoadNetConf([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if conf.MTUValue() != DefaultMTU || conf.VethPrefix != DefaultVethPrefix {
				t.Fatalf("defaults not applied: %+v", conf)
			}
			if strings.Contains(tc.in, "prevResult") && conf.PrevResult == nil {
				t.Fatal("prevResult not parsed")
			}
		})
	}
}

func TestHostVethName(t *testing.T) {
	a := hostVethName("eni", "default", "web-0", "c1")
	if len(a) != 14 || !strings.HasPrefix(a, "eni") {
		t.Fatalf("hostVethName = %q", a)
	}
	if b := hostVethName("eni", "default", "web-0", "c2"); b != a {
		t.Fatalf("a pod's veth name changed with its sandbox: %q, %q", a, b)
	}
	if b := hostVethName("eni", "other", "web-0", "c1"); b == a {
		t.Fatal("two pods share a veth name")
	}
	if b := hostVethName("abcd", "", "", "c1"); len(b) != 15 {
		t.Fatalf("longest name %q is not 15 characters", b)
	}
}
