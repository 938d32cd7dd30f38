// Package v1alpha1 holds TauGrid's custom resources, group taugrid.dev:
// TauPlatform (the platform repo that holds policy), TauRepository (a
// research repo to watch) and TauRun (one requested run).
//
// +kubebuilder:object:generate=true
// +groupName=taugrid.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version of TauGrid's resources.
var GroupVersion = schema.GroupVersion{Group: "taugrid.dev", Version: "v1alpha1"}

// objects are this group's types, registered by each type's file.
var objects []runtime.Object

// register adds types to the group; called from init in each type's file.
func register(objs ...runtime.Object) { objects = append(objects, objs...) }

// AddToScheme adds the types of this group to a scheme.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, objects...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
