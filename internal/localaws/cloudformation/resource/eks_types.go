package resource

// eksTypes are the eks resource types (to be written).
func eksTypes(Clients) map[string]Provisioner { return map[string]Provisioner{} }
