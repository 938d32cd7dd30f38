package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/taugrid/taugrid/controllers/sealing"
	"github.com/taugrid/taugrid/evidence"
	"github.com/taugrid/taugrid/test/chart"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The attestation key is read at every seal, so that a key the platform
// team replaces signs from the next seal on; each read was one request to
// the API server a run. TestTheAttestationKeyIsWatchedNotReadAtEachSeal
// runs the key's watch (sealing.KeySecretCache) as cmd/tau-controller does,
// under the chart's RBAC: reading the key sends nothing once the watch
// holds it, a replaced key signs once the watch brings it, a deleted one
// is made again, and the watch holds no other Secret of the namespace.
func TestTheAttestationKeyIsWatchedNotReadAtEachSeal(t *testing.T) {
	integration(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const name = "tau-attestation-key-watched"
	counted := newAPIRequests(t)
	cfg := rest.CopyConfig(installChartRBAC(t))
	cfg.WrapTransport = counted.m.Wrap
	other := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: chart.Namespace, Name: "another-secret"}, Data: map[string][]byte{"k": []byte("v")}}
	if err := k8s.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = k8s.Delete(context.Background(), other) }()

	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	watched, err := sealing.KeySecretCache(cfg, scheme, chart.Namespace, name)
	if err != nil {
		t.Fatal(err)
	}
	keys := &sealing.AttestationKeys{Client: direct, Cache: watched, Namespace: chart.Namespace, Name: name}
	// As cmd/tau-controller: the key read (here: made) before the watch starts.
	first, err := keys.Key(ctx)
	if err != nil {
		t.Fatalf("the first key, before the watch starts: %v", err)
	}
	defer func() {
		_ = k8s.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: chart.Namespace, Name: name}})
	}()
	go func() {
		if err := watched.Start(ctx); err != nil {
			t.Errorf("the key's watch: %v", err)
		}
	}()
	if !watched.WaitForCacheSync(ctx) {
		t.Fatal("the key's watch did not sync")
	}

	counted.start(t)
	for range 5 {
		k, err := keys.Key(ctx)
		if err != nil || k.Fingerprint != first.Fingerprint {
			t.Fatalf("the key read from the watch: %v, %v; want %s", k, err, first.Fingerprint)
		}
	}
	if n := sentBesidesWatches(t, counted); len(n) != 0 {
		t.Errorf("five reads of the key sent the API server %v; want nothing", n)
	}
	var held corev1.SecretList
	if err := watched.List(ctx, &held); err != nil || len(held.Items) != 1 || held.Items[0].Name != name {
		t.Errorf("the watch holds %d Secrets (%v); want only %s", len(held.Items), err, name)
	}

	// The platform team replaces the key: the next seal after the watch
	// brings it signs with the new one.
	priv, pub, err := evidence.NewAttestationKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: chart.Namespace, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	s.Data = map[string][]byte{sealing.AttestationPrivateField: priv, sealing.AttestationPublicField: pub}
	if err := k8s.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	replaced, err := evidence.ParseAttestationKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the replaced key to sign", func() bool {
		k, err := keys.Key(ctx)
		return err == nil && k.Fingerprint == replaced.Fingerprint
	})
	if n := sentBesidesWatches(t, counted); len(n) != 0 {
		t.Errorf("reading the replaced key sent the API server %v; want nothing", n)
	}

	// Deleted: the next read makes a new one, around the watch.
	if err := k8s.Delete(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "a new key after the Secret was deleted", func() bool {
		k, err := keys.Key(ctx)
		return err == nil && k.Fingerprint != replaced.Fingerprint && k.Fingerprint != first.Fingerprint
	})
	made := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: chart.Namespace, Name: name}, made); err != nil {
		t.Fatalf("the key's Secret was not made again: %v", err)
	}
	for what := range sentBesidesWatches(t, counted) {
		if !strings.HasSuffix(what, " secrets") {
			t.Errorf("remaking the key sent %q", what)
		}
	}
}

// sentBesidesWatches is what was counted since start but the watches (an
// informer's, which the API server ends now and then).
func sentBesidesWatches(t *testing.T, a *apiRequests) map[string]int {
	t.Helper()
	n, _ := a.counts(t)
	for what := range n {
		if strings.HasPrefix(what, "watch ") {
			delete(n, what)
		}
	}
	return n
}

// watchedAttestationKeys are the attestation keys as cmd/tau-controller
// reads them: Secret namespace/name from a watch of it alone, added to mgr
// (which starts it), made and read around it with mgr's config.
func watchedAttestationKeys(t *testing.T, mgr ctrl.Manager, namespace, name string) *sealing.AttestationKeys {
	t.Helper()
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	watched, err := sealing.KeySecretCache(mgr.GetConfig(), scheme, namespace, name)
	if err == nil {
		err = mgr.Add(watched)
	}
	if err != nil {
		t.Fatal(err)
	}
	return &sealing.AttestationKeys{Client: direct, Cache: watched, Namespace: namespace, Name: name}
}

// awaitAttestationKey reads (or makes) the key, once the manager has
// started, and waits until its watch holds it: what cmd/tau-controller
// does at its start, before the first seal.
func awaitAttestationKey(t *testing.T, keys *sealing.AttestationKeys) {
	t.Helper()
	ctx := context.Background()
	if _, err := keys.Key(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the attestation key in its watch", func() bool {
		return keys.Cache.Get(ctx, client.ObjectKey{Namespace: keys.Namespace, Name: keys.Name}, &corev1.Secret{}) == nil
	})
}

// TestTheAttestationKeyIsReadAroundAWatchTheAPIServerRefuses: a controller
// whose role grants get and create on its Secrets but not list and watch
// (a role from before the watch, or edited by hand) still seals: each
// read of the key goes to the API server, at once, as before the watch,
// rather than waiting for a watch that never syncs.
func TestTheAttestationKeyIsReadAroundAWatchTheAPIServerRefuses(t *testing.T) {
	integration(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns, user, name = "attest-nowatch", "nowatch-controller", "tau-attestation-key"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	counted := newAPIRequests(t)
	cfg := rest.CopyConfig(env.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cfg.WrapTransport = counted.m.Wrap
	direct, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	watched, err := sealing.KeySecretCache(cfg, scheme, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	keys := &sealing.AttestationKeys{Client: direct, Cache: watched, Namespace: ns, Name: name}
	first, err := keys.Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = watched.Start(ctx) }()
	time.Sleep(time.Second) // the watch tried, and was refused
	counted.start(t)
	start := time.Now()
	for range 3 {
		k, err := keys.Key(ctx)
		if err != nil || k.Fingerprint != first.Fingerprint {
			t.Fatalf("the key read around the refused watch: %v, %v; want %s", k, err, first.Fingerprint)
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("three reads of the key took %s: they waited for the refused watch", took)
	}
	if n := sentBesidesWatches(t, counted); n["get secrets"] != 3 {
		t.Errorf("three reads sent %v; want 3 gets of the Secret", n)
	}
}
