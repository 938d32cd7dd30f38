package reconciler

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// secretReads counts the Secrets read through it.
type secretReads struct {
	client.Reader
	n atomic.Int32
}

func (c *secretReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*corev1.Secret); ok {
		c.n.Add(1)
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// A delivery for a known receiver reads one Secret; unknown receivers
// rescan every webhook repository at most once per rescanEvery.
func TestWebhookReceiversReadOneSecretPerDelivery(t *testing.T) {
	f := newRunFixture(t, "rw1")
	ctx := context.Background()
	var ids []string
	for _, name := range []string{"hooked-1", "hooked-2", "hooked-3"} {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns}, Data: map[string][]byte{SecretToken: []byte(name + "-secret")}}
		repo := &taugridv1.TauRepository{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ns},
			Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: "https://git.example.com/" + name + ".git"}, Platform: "none",
				Interval: metav1.Duration{Duration: time.Minute}, Webhook: &taugridv1.Webhook{SecretRef: taugridv1.LocalObjectReference{Name: name}}}}
		for _, o := range []client.Object{secret, repo} {
			if err := k8s.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
		ids = append(ids, gitsource.WebhookID(f.ns, name, []byte(name+"-secret")))
	}
	reads := &secretReads{Reader: k8s}
	clk := clocktesting.NewFakePassiveClock(time.Now())
	w := &WebhookReceivers{Client: reads, Forge: gitsource.ForgeGitHub, Clock: clk}

	rc, err := w.Receiver(ctx, ids[1])
	if err != nil || rc.RepoURL != "https://git.example.com/hooked-2.git" {
		t.Fatalf("first delivery: %+v, %v", rc, err)
	}
	first := reads.n.Load() // a scan: every webhook repository of the cluster
	for range 5 {
		if rc, err := w.Receiver(ctx, ids[2]); err != nil || string(rc.Secret) != "hooked-3-secret" {
			t.Fatalf("known receiver: %+v, %v", rc, err)
		}
	}
	if got := reads.n.Load() - first; got != 5 {
		t.Errorf("5 deliveries to known receivers read %d Secrets, want 5", got)
	}
	before := reads.n.Load()
	for range 3 {
		if _, err := w.Receiver(ctx, "unknown"); err == nil {
			t.Fatal("an unknown receiver was found")
		}
	}
	if got := reads.n.Load() - before; got != 0 {
		t.Errorf("unknown receivers within %s of a scan read %d Secrets, want none", rescanEvery, got)
	}
	clk.SetTime(clk.Now().Add(rescanEvery))
	if _, err := w.Receiver(ctx, "unknown"); err == nil || reads.n.Load() == before {
		t.Errorf("after %s an unknown receiver should rescan (err %v)", rescanEvery, err)
	}
}
