package bootstrap

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
)

// Unit drop-ins nodeadm writes.
const (
	KubeletUnitDropIn    = "/etc/systemd/system/kubelet.service.d/10-nodeadm.conf"
	ManagerEnvironment   = "/etc/systemd/system.conf.d/environment.conf"
	ResolvedDropIn       = "/run/systemd/resolved.conf.d/40-eks.conf"
	serviceEnvironmentFn = "environment.conf"
)

// units writes the kubelet unit's drop-in, which runs the kubelet with the flags of
// the environment file, and spec.instance.environment: key "default" for every
// service, any other key for that unit only.
func (r *renderer) units() error {
	r.out.Files.add(KubeletUnitDropIn, 0o644, []byte(fmt.Sprintf(
		"[Service]\nEnvironmentFile=%s\nExecStart=\nExecStart=/usr/bin/kubelet $%s\n", r.p(KubeletEnvPath), KubeletArgsVar)))
	if n := r.cfg.Spec.Instance.Network; len(n.Nameservers) > 0 || len(n.Domains) > 0 {
		r.out.Files.add(ResolvedDropIn, 0o644, []byte(fmt.Sprintf("[Resolve]\nDNS=%s\nDomains=%s\n",
			strings.Join(n.Nameservers, " "), strings.Join(n.Domains, " "))))
	}
	env := r.cfg.Spec.Instance.Environment
	for _, svc := range sortedKeys(env) {
		vars := env[svc]
		if len(vars) == 0 {
			continue
		}
		var b strings.Builder
		path, key := ManagerEnvironment, "DefaultEnvironment"
		if svc == "default" {
			b.WriteString("[Manager]\n")
		} else {
			if strings.ContainsAny(svc, "/\\") || svc == "." || svc == ".." {
				return fmt.Errorf("spec.instance.environment: %q is not a unit name", svc)
			}
			path, key = filepath.Join("/etc/systemd/system", svc+".service.d", serviceEnvironmentFn), "Environment"
			b.WriteString("[Service]\n")
		}
		for _, k := range sortedKeys(vars) {
			fmt.Fprintf(&b, "%s=\"%s=%s\"\n", key, k, systemdEscape(vars[k]))
		}
		r.out.Files.add(path, 0o644, []byte(b.String()))
	}
	return nil
}

// systemdEscape quotes a value for a double-quoted systemd assignment: Go quoting
// without the outer quotes, and % doubled for systemd's specifier expansion.
func systemdEscape(v string) string {
	q := strconv.Quote(v)
	return strings.ReplaceAll(q[1:len(q)-1], "%", "%%")
}
