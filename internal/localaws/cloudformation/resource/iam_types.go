package resource

// iamTypes are the iam resource types (to be written).
func iamTypes(Clients) map[string]Provisioner { return map[string]Provisioner{} }
