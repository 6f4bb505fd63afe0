package instance

// What a node that is no instance — the control-plane node (sandbox/cpnode), whose
// kubelet runs in the cluster namespace — shares with local instances: the same host
// adaptations of containerd and the kubelet, the same cgroup and mount handling.

// LocalContainerdConfig is localContainerdConfig for a node whose root is root.
func LocalContainerdConfig(root string) string { return localContainerdConfig(root) }

// LocalRuntimeSpec is localRuntimeSpec: the open-files limit within the host's.
func LocalRuntimeSpec() map[string]any { return localRuntimeSpec() }

// CreateCgroup makes a kubelet's --cgroup-root in every hierarchy.
func CreateCgroup(path string) error { return createCgroup(path) }

// RemoveCgroup kills what runs in the cgroup path and removes it.
func RemoveCgroup(path string) error { return removeCgroup(path) }

// UnmountAll unmounts everything mounted below dir, deepest first.
func UnmountAll(dir string) error { return unmountAll(dir) }
