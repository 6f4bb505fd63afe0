package sandbox

// NodeRoleName is the IAM role (and instance profile) of a cluster's instances: those
// `up` and `add node` launch, and those of node groups, whose launch templates default
// to it.
func NodeRoleName(cluster string) string { return nodeRole(cluster) }
