// Package v1alpha1 holds TauGrid's custom resources, group taugrid.dev:
// TauPlatform (the platform repo that holds policy), TauRepository (a
// research repo to watch) and TauRun (one requested run).
//
// +kubebuilder:object:generate=true
// +groupName=taugrid.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of TauGrid's resources.
	GroupVersion = schema.GroupVersion{Group: "taugrid.dev", Version: "v1alpha1"}

	// SchemeBuilder registers the types with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this group to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
