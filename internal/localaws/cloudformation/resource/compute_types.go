package resource

// computeTypes are the compute resource types (to be written).
func computeTypes(Clients) map[string]Provisioner { return map[string]Provisioner{} }
