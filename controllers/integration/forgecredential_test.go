package integration

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/taugrid/taugrid/forge"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretGets counts the Secret reads that reach the API server.
type secretGets struct {
	client.Client
	n *atomic.Int32
}

func (c secretGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.n.Add(1)
	}
	return c.Client.Get(ctx, key, obj, opts...)
}

// Runs waiting for the forge credential's budget do not read the forge
// Secret at every try: it is read once, and again after
// forgeCredentialTTL, so a rotated token is still picked up.
func TestTheForgeSecretIsReadOncePerTTLWhileRunsWaitForTheBudget(t *testing.T) {
	f := newForgeFixture(t, "fc1", forge.Gitea, forgeToken)
	f.r.Posters.Buckets = &forge.Buckets{Rate: 1, Burst: 1}
	var gets atomic.Int32
	f.r.Posters.Reader = secretGets{Client: k8s, n: &gets} // forge Secrets are read through the Posters
	f.research.tag("run/first")
	f.research.tag("run/second")
	f.poll(t)
	first, second := f.runOf(t, "refs/tags/run/first"), f.runOf(t, "refs/tags/run/second")

	f.mustReconcileForge(t, first.Name) // takes the only token
	for range 5 {
		f.mustReconcileForge(t, second.Name) // the budget is spent
	}
	if n := gets.Load(); n != 1 {
		t.Errorf("%d forge Secret reads for one post and five waiting tries, want 1", n)
	}
	f.clock.Step(forge.CredentialTTL)
	f.mustReconcileForge(t, second.Name)
	if n := gets.Load(); n != 2 {
		t.Errorf("%d forge Secret reads once the TTL passed, want 2", n)
	}
	if got := f.getRun(t, second.Name).Status.Forge; got == nil || got.InFlight {
		t.Errorf("status.forge = %+v, want the second run's post recorded", got)
	}
}
