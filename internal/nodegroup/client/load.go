package client

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nodejoin/nodejoin/api/nodejoin/v1alpha1"
	"github.com/nodejoin/nodejoin/internal/eksctl"
	"github.com/nodejoin/nodejoin/internal/strictyaml"
)

// Loaded is what a -f file holds.
type Loaded struct {
	// Source names the file.
	Source string
	// Format is "eksctl.io/v1alpha5 ClusterConfig" or "nodejoin.io/v1alpha1 NodeGroup".
	Format string
	// Cluster is the eksctl file's metadata.name; empty for NodeGroup manifests.
	Cluster string
	// NodeGroups are the groups, in file order.
	NodeGroups []v1alpha1.NodeGroup
	// Ignored are the eksctl fields nodejoin does not use.
	Ignored []eksctl.Ignored
}

// The formats of Loaded.Format.
const (
	FormatEksctl    = eksctl.APIVersion + " " + eksctl.Kind
	FormatNodeGroup = "nodejoin.io/v1alpha1 NodeGroup"
)

// Load reads an eksctl ClusterConfig (its nodeGroups and managedNodeGroups) or one or
// more NodeGroup manifests. Every group is defaulted and validated; the errors name
// the file, the group and the field.
func Load(data []byte, source string) (*Loaded, error) {
	if eksctl.IsClusterConfig(data) {
		f, err := eksctl.Parse(data, source)
		if err != nil {
			return nil, err
		}
		res, err := eksctl.Convert(f)
		if err != nil {
			return nil, err
		}
		l := &Loaded{Source: source, Format: FormatEksctl, Cluster: res.Cluster, NodeGroups: res.NodeGroups, Ignored: res.Ignored}
		if len(l.NodeGroups) == 0 {
			return nil, fmt.Errorf("%s: the ClusterConfig has no nodeGroups or managedNodeGroups; add a group to create", source)
		}
		return l, validate(l)
	}
	l := &Loaded{Source: source, Format: FormatNodeGroup}
	docs, err := strictyaml.Split(data, source)
	if err != nil {
		return nil, err
	}
	for _, doc := range docs {
		if av, kind := doc.Head(); av != v1alpha1.GroupVersion.String() || kind != v1alpha1.NodeGroupKind {
			return nil, fmt.Errorf("%s: document %d (line %d) is apiVersion %q kind %q: want a NodeGroup (apiVersion %s) or an eksctl ClusterConfig (apiVersion %s)",
				source, doc.Index, doc.Line, av, kind, v1alpha1.GroupVersion, eksctl.APIVersion)
		}
		var ng v1alpha1.NodeGroup
		if _, err := strictyaml.DecodeDocument(doc, source, &ng, strictyaml.Options{}); err != nil {
			return nil, err
		}
		if ng.Name == "" {
			return nil, fmt.Errorf("%s: document %d (line %d): metadata.name: missing; name the group", source, doc.Index, doc.Line)
		}
		for _, prev := range l.NodeGroups {
			if prev.Name == ng.Name {
				return nil, fmt.Errorf("%s: document %d (line %d): node group %s is given twice", source, doc.Index, doc.Line, ng.Name)
			}
		}
		l.NodeGroups = append(l.NodeGroups, ng)
	}
	if len(l.NodeGroups) == 0 {
		return nil, fmt.Errorf("%s: no NodeGroup in the file", source)
	}
	return l, validate(l)
}

// validate checks each group as the API server will.
func validate(l *Loaded) error {
	var errs []error
	for i := range l.NodeGroups {
		if fes := l.NodeGroups[i].Validate(); len(fes) > 0 {
			msgs := make([]string, len(fes))
			for j, fe := range fes {
				msgs[j] = fe.Error()
			}
			errs = append(errs, fmt.Errorf("%s: node group %s: %s", l.Source, l.NodeGroups[i].Name, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}

// Group returns the loaded group name, or an error listing the names there are.
func (l *Loaded) Group(name string) (*v1alpha1.NodeGroup, error) {
	names := make([]string, 0, len(l.NodeGroups))
	for i := range l.NodeGroups {
		if l.NodeGroups[i].Name == name {
			return &l.NodeGroups[i], nil
		}
		names = append(names, l.NodeGroups[i].Name)
	}
	return nil, fmt.Errorf("%s has no node group %s (it has %s)", l.Source, name, strings.Join(names, ", "))
}

// templateEqual compares two templates as the API server stores them (defaulted).
func templateEqual(a, b v1alpha1.NodeTemplate) bool {
	x := &v1alpha1.NodeGroup{Spec: v1alpha1.NodeGroupSpec{Template: *a.DeepCopy()}}
	y := &v1alpha1.NodeGroup{Spec: v1alpha1.NodeGroupSpec{Template: *b.DeepCopy()}}
	x.Default()
	y.Default()
	return equality.Semantic.DeepEqual(x.Spec.Template, y.Spec.Template)
}
