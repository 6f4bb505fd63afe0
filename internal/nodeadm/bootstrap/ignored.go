package bootstrap

import "github.com/nodejoin/nodejoin/api/nodeconfig/v1alpha1"

// IgnoredSetting is a setting that validates but that nodeadm does not apply yet.
type IgnoredSetting struct {
	// Field is the setting's path in the NodeConfig, such as spec.instance.localStorage.
	Field string
	// Reason says what is missing, for a warning.
	Reason string
}

// Ignored lists the settings of cfg that nodeadm init accepts but does not apply, so
// that init and `config check` can say so instead of dropping them silently.
func Ignored(cfg *v1alpha1.NodeConfig) []IgnoredSetting {
	var out []IgnoredSetting
	ls := cfg.Spec.Instance.LocalStorage
	if ls.Strategy != "" || ls.MountPath != "" || len(ls.DisabledMounts) > 0 {
		out = append(out, IgnoredSetting{
			Field:  "spec.instance.localStorage",
			Reason: "local storage setup (bootstrap.sh --local-disks) is not implemented yet; the setting is ignored and the instance-store disks are left alone",
		})
	}
	return out
}
