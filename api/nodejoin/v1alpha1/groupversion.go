package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is nodejoin.io/v1alpha1.
	GroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}
	// SchemeBuilder registers the group's API objects.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds NodeAccessEntry, NodeGroup and their lists to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &NodeAccessEntry{}, &NodeAccessEntryList{}, &NodeGroup{}, &NodeGroupList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
