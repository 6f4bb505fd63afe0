// Package version reports the version of nodejoin's binaries.
package version

import "runtime/debug"

// Version is set at link time (-X github.com/nodejoin/nodejoin/internal/version.Version=...);
// otherwise it is taken from the module's build information.
var Version = ""

// Get returns the version of the running binary, such as "v0.1.0" or "(devel)".
func Get() string {
	if Version != "" {
		return Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" {
		v := info.Main.Version
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v += "+" + s.Value[:12]
			}
		}
		return v
	}
	return "(devel)"
}
