// Package cniplugin is the nodejoin-cni command: the CNI plugin the container runtime
// executes for each pod sandbox (ADD, DEL, CHECK, STATUS, VERSION per the CNI spec). The
// logic is in github.com/nodejoin/nodejoin/internal/netagent/cniplugin.
package cniplugin

import (
	"runtime"

	"github.com/containernetworking/cni/pkg/skel"

	"github.com/nodejoin/nodejoin/internal/netagent/cniplugin"
	"github.com/nodejoin/nodejoin/internal/version"
)

// Namespace operations switch the calling thread's network namespace, so main must stay
// on one thread.
func init() { runtime.LockOSThread() }

// Main runs the plugin: skel reads the CNI environment and stdin, prints the result or
// the error as JSON on stdout and exits non-zero on error.
func Main() {
	p := &cniplugin.Plugin{}
	skel.PluginMainFuncs(p.Funcs(), cniplugin.SupportedVersions,
		"nodejoin-cni "+version.Get()+": the VPC CNI's pod networking against nodejoin's ipamd")
}
