package controlplane

import (
	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kueuev1beta2 "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// NewScheme returns a scheme with the built-in types, CRDs themselves, Kueue
// v1beta2 and Ray v1.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(kueuev1beta2.AddToScheme(s))
	utilruntime.Must(rayv1.AddToScheme(s))
	return s
}
