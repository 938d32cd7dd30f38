package impact

import (
	"fmt"
	"io/fs"
	"sync"

	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/render"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Policy is a platform policy as the preview compares it: the policy
// files and the Kueue objects declared under kueue/.
type Policy struct {
	*render.Policy
	// Queues are the kueue/ objects, in apply order.
	Queues []*unstructured.Unstructured
	// Commit names the policy in the text ("the policy in force at
	// 1a2b3c4", "the working tree"); "" reads as "the policy".
	Commit string

	// What the preview reads of Queues, once (clusterQueues, flavorLabels).
	readQueues, readFlavors sync.Once
	queues                  map[string]*clusterQueue
	flavors                 map[string]map[string]string
}

// Load reads a platform policy directory as the controller does: the
// policy files (errors name file, line and field) and kueue/ (errors name
// the file and the document). label says which policy it is in an error.
func Load(tree fs.FS, label string) (*Policy, error) {
	pol, err := render.LoadPolicy(tree)
	if err != nil {
		return nil, fmt.Errorf("%s does not load:\n%w", label, err)
	}
	objs, err := policy.LoadQueues(tree, pol)
	if err != nil {
		return nil, fmt.Errorf("%s does not load: %w", label, err)
	}
	return &Policy{Policy: pol, Queues: objs, Commit: label}, nil
}

// objects are the declared Kueue objects of one kind.
func (p *Policy) objects(kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, u := range p.Queues {
		if u.GetKind() == kind {
			out = append(out, u)
		}
	}
	return out
}

// object is the declared Kueue object of this kind, namespace and name.
func (p *Policy) object(kind, namespace, name string) *unstructured.Unstructured {
	for _, u := range p.Queues {
		if u.GetKind() == kind && u.GetNamespace() == namespace && u.GetName() == name {
			return u
		}
	}
	return nil
}

// clusterQueueOf is the ClusterQueue a LocalQueue feeds; "" when the
// LocalQueue is not declared.
func (p *Policy) clusterQueueOf(namespace, localQueue string) string {
	lq := p.object("LocalQueue", namespace, localQueue)
	if lq == nil {
		return ""
	}
	cq, _, _ := unstructured.NestedString(lq.Object, "spec", "clusterQueue")
	return cq
}
