package ssm

// This file names the public parameters: for each AMI family the path AWS publishes its
// latest EKS-optimized image under (eksctl's pkg/ami builds the same names), and the
// fields below it.

import (
	"encoding/json"
	"regexp"
	"strings"
	"time"

	"github.com/nodejoin/nodejoin/internal/localaws/ec2"
)

// parameter is a parameter's value, its version and when it last changed.
type parameter struct {
	value    string
	version  int64
	modified time.Time
}

// family is where one AMI family's parameters live: a pattern whose one group is the
// Kubernetes version, and the fields under it.
type family struct {
	name string
	re   *regexp.Regexp
	// fields are the leaves below the path, each a field of the release; "" is the
	// path itself, when it holds a JSON document of the fields.
	fields map[string]func(ec2.Release) string
}

// amiFields are the Amazon Linux and Windows parameters' leaves.
var amiFields = map[string]func(ec2.Release) string{
	"/image_id":        func(r ec2.Release) string { return r.ImageID },
	"/image_name":      func(r ec2.Release) string { return r.Name },
	"/release_version": func(r ec2.Release) string { return r.ReleaseVersion },
	"/schema_version":  func(ec2.Release) string { return schemaVersion },
	"":                 document,
}

// schemaVersion is the version of the recommended document's shape.
const schemaVersion = "2"

// document is the JSON the recommended path itself holds: its leaves in one object.
func document(r ec2.Release) string {
	b, _ := json.Marshal(map[string]string{"schema_version": schemaVersion, "image_id": r.ImageID, "image_name": r.Name,
		"release_version": r.ReleaseVersion})
	return string(b)
}

var families = []family{
	{ec2.FamilyAmazonLinux2, regexp.MustCompile(`^/aws/service/eks/optimized-ami/(1\.[0-9]+)/amazon-linux-2/recommended(/[a-z_]+)?$`), amiFields},
	{ec2.FamilyAmazonLinux2023, regexp.MustCompile(`^/aws/service/eks/optimized-ami/(1\.[0-9]+)/amazon-linux-2023/x86_64/standard/recommended(/[a-z_]+)?$`), amiFields},
	{ec2.FamilyBottlerocket, regexp.MustCompile(`^/aws/service/bottlerocket/aws-k8s-(1\.[0-9]+)/x86_64/latest(/[a-z_]+)$`), map[string]func(ec2.Release) string{
		"/image_id":      func(r ec2.Release) string { return r.ImageID },
		"/image_version": func(r ec2.Release) string { return r.ReleaseVersion },
	}},
	{ec2.FamilyWindows, regexp.MustCompile(`^/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-(1\.[0-9]+)(/[a-z_]+)?$`), amiFields},
}

// canonical is a parameter's name: a public parameter may be named by its ARN, which
// has no account.
func (s *SSM) canonical(name string) string {
	return strings.TrimPrefix(name, "arn:aws:ssm:"+s.region+"::parameter")
}

// lookup finds a public parameter: the field of the latest release of the family and
// Kubernetes version its name says.
func (s *SSM) lookup(name string) (parameter, bool) {
	for _, f := range families {
		m := f.re.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		field, ok := f.fields[m[2]]
		if !ok {
			return parameter{}, false
		}
		r, ok := s.releases.Latest(m[1], f.name)
		if !ok {
			return parameter{}, false
		}
		// Each release the catalog holds was one version of the parameter.
		var version int64
		for _, old := range s.releases.Releases(m[1]) {
			if old.Family == f.name {
				version++
			}
		}
		return parameter{value: field(r), version: version, modified: r.CreationDate}, true
	}
	return parameter{}, false
}
