package resource

// ec2Types are the ec2 resource types (to be written).
func ec2Types(Clients) map[string]Provisioner { return map[string]Provisioner{} }
