package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	batchv1 "k8s.io/api/batch/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/render"
)

// verdict is the check's state for a workload and the sentence that says
// why.
type verdict struct {
	state   kueue.CheckState
	message string
}

// The sentences start alike so that a reader of the workload (kubectl
// describe, tau status) sees at once whose refusal it is.
func rejected(format string, args ...any) *verdict {
	return &verdict{kueue.CheckStateRejected, "TauGrid policy: " + fmt.Sprintf(format, args...)}
}

func waiting(format string, args ...any) *verdict {
	return &verdict{kueue.CheckStatePending, "TauGrid policy: " + fmt.Sprintf(format, args...)}
}

// subject is what the checks look at: the workload, the object that owns
// it, and the run that owns that.
type subject struct {
	wl *kueue.Workload
	// owner is read whole from the API server, or, while cached, from the
	// controller's cache, which keeps no pod templates.
	owner  client.Object
	cached bool
	// copy is, on a worker, the Job or RayJob MultiKueue made there from
	// owner, the manager's.
	copy client.Object
	kind string
	run  *taugridv1.TauRun
}

// decide runs the chain: the first check with something to say decides;
// a workload every check passes is Ready. Each check is a named function
// with its attacker in its test (checks_test.go).
//
// The chain reads the Job or RayJob from the controller's cache first:
// what Kueue is about to admit is the object TauGrid created while the
// API server's count of changes to its spec (metadata.generation) and its
// labels are as the run recorded them. Only when the cache cannot show
// that (no such object there yet, another one, a spec changed since) is
// the chain run again on the object read whole from the API server, which
// names what changed. The cache lags the API server by a moment: a change
// made in that moment is one made just after a read of the API server
// would have been. Kueue closes that for the pod templates, with either
// read: it deletes a workload whose Job or RayJob no longer matches its
// pod sets, and the one it makes again waits on this check again.
func (c *Check) decide(ctx context.Context, wl *kueue.Workload) (verdict, error) {
	v, err := c.decideOn(ctx, &subject{wl: wl, cached: c.Client != nil})
	if errors.Is(err, errReadWhole) {
		return c.decideOn(ctx, &subject{wl: wl})
	}
	return v, err
}

func (c *Check) decideOn(ctx context.Context, s *subject) (verdict, error) {
	return chain(ctx, s, "%s %s was rendered for run %s under policy commit %s and is unchanged since (%s)",
		c.ownedByAJobOrRayJob,
		c.ownedByARun,
		recordedByTheRun,
		runStillWanted,
		unchangedSinceRender,
	)
}

// errReadWhole: the object read from the cache does not show that it is
// unchanged; decide reads it whole and judges again.
var errReadWhole = errors.New("the cached object does not show it unchanged: read it whole")

// chain runs steps on s in order: the first with something to say
// decides; when none has, s is Ready, ready saying why (the run's
// workload kind and name, the run, the policy commit, the digest).
func chain(ctx context.Context, s *subject, ready string, steps ...func(context.Context, *subject) (*verdict, error)) (verdict, error) {
	for _, step := range steps {
		v, err := step(ctx, s)
		if err != nil || v != nil {
			if v == nil {
				v = &verdict{}
			}
			return *v, err
		}
	}
	w := s.run.Status.Workload
	return verdict{kueue.CheckStateReady, "TauGrid policy: " + fmt.Sprintf(ready,
		w.Kind, w.Name, s.run.Name, shared.Short(s.run.Status.PolicyCommit), shortDigest(w.Digest))}, nil
}

// ownedByAJobOrRayJob: a Workload made by hand, or by any other kind of
// object, is none TauGrid rendered.
func (c *Check) ownedByAJobOrRayJob(ctx context.Context, s *subject) (*verdict, error) {
	reader := c.APIReader
	if s.cached {
		reader = c.Client
	}
	owner, kind, v, err := ownerOf(ctx, reader, s.wl)
	switch {
	case owner == nil && s.cached:
		// Whatever the cache says or fails to say (no such object yet,
		// an earlier one), the API server says it whole.
		return nil, errReadWhole
	case owner == nil:
		return v, err
	}
	s.owner, s.kind = owner, kind
	return nil, nil
}

// ownerOf reads from reader the Job or RayJob that controls wl in this
// Check's cluster; when there is none to judge, the verdict says why.
func ownerOf(ctx context.Context, reader client.Reader, wl *kueue.Workload) (client.Object, string, *verdict, error) {
	ref := metav1.GetControllerOfNoCopy(wl)
	if ref == nil {
		return nil, "", rejected("created outside TauGrid: the workload belongs to no Job or RayJob"), nil
	}
	owner := newOwner(ref.APIVersion, ref.Kind)
	if owner == nil {
		return nil, "", rejected("created outside TauGrid: the workload belongs to %s %s, and TauGrid makes only Jobs and RayJobs", ref.Kind, ref.Name), nil
	}
	err := reader.Get(ctx, client.ObjectKey{Namespace: wl.Namespace, Name: ref.Name}, owner)
	if apierrors.IsNotFound(err) {
		return nil, "", waiting("%s %s is gone; Kueue removes its workload", ref.Kind, ref.Name), nil
	}
	if err != nil {
		return nil, "", nil, err
	}
	if owner.GetUID() != ref.UID {
		return nil, "", waiting("%s %s was made again; Kueue makes its workload again", ref.Kind, ref.Name), nil
	}
	return owner, ref.Kind, nil, nil
}

// newOwner is an empty object of the kinds TauGrid renders; nil for any
// other.
func newOwner(apiVersion, kind string) client.Object {
	switch {
	case apiVersion == batchv1.SchemeGroupVersion.String() && kind == "Job":
		return &batchv1.Job{}
	case apiVersion == rayv1.GroupVersion.String() && kind == "RayJob":
		return &rayv1.RayJob{}
	}
	return nil
}

// ownedByARun: the Job must be controlled by a TauRun that exists, the
// very one its owner reference names (by UID, not only by name).
func (c *Check) ownedByARun(ctx context.Context, s *subject) (*verdict, error) {
	ref := metav1.GetControllerOfNoCopy(s.owner)
	if ref == nil || ref.APIVersion != taugridv1.GroupVersion.String() || ref.Kind != "TauRun" {
		return rejected("created outside TauGrid: %s %s belongs to no TauGrid run", s.kind, s.owner.GetName()), nil
	}
	run := &taugridv1.TauRun{}
	err := c.runs().Get(ctx, client.ObjectKey{Namespace: s.wl.Namespace, Name: ref.Name}, run)
	if apierrors.IsNotFound(err) {
		return rejected("created outside TauGrid: %s %s names run %s, which does not exist", s.kind, s.owner.GetName(), ref.Name), nil
	}
	if err != nil {
		return nil, err
	}
	if run.UID != ref.UID {
		return rejected("created outside TauGrid: %s %s names an earlier run %s, not the one there now", s.kind, s.owner.GetName(), ref.Name), nil
	}
	s.run = run
	return nil, nil
}

// recordedByTheRun: the run's status must record this very object (its
// UID) as its current workload. Until it records one, the check waits;
// an object it did not record, made under its name or another, never
// passes.
func recordedByTheRun(_ context.Context, s *subject) (*verdict, error) {
	w := s.run.Status.Workload
	name := s.owner.GetName()
	switch {
	case w == nil || w.UID == "":
		return waiting("waiting for run %s to record %s %s as the workload it submitted", s.run.Name, s.kind, name), nil
	case w.Kind != s.kind || w.Name != name:
		return rejected("created outside TauGrid: run %s submitted %s %s, not %s %s", s.run.Name, w.Kind, w.Name, s.kind, name), nil
	case w.UID != s.owner.GetUID():
		return rejected("created outside TauGrid: %s %s is not the one run %s submitted under that name", s.kind, name, s.run.Name), nil
	case w.Digest == "":
		return rejected("run %s recorded no digest of what it rendered", s.run.Name), nil
	}
	return nil, nil
}

// unchangedSinceRender: the object must still hash to what the API server
// stored when TauGrid created it; the fields that changed are named. One
// from the cache, which keeps no pod templates, must show it another way:
// its generation, which the API server moves at every change of the
// spec, and its labels, as the run recorded them.
func unchangedSinceRender(_ context.Context, s *subject) (*verdict, error) {
	if s.cached {
		w := s.run.Status.Workload
		if w.Generation == 0 || s.owner.GetGeneration() != w.Generation || render.LabelsDigest(s.owner.GetLabels()) != w.LabelsDigest {
			return nil, errReadWhole
		}
		return nil, nil
	}
	return sameAsRendered(s, s.owner, "%s %s changed after TauGrid rendered it: %s")
}

// sameAsRendered compares obj with the fingerprint the run recorded;
// refusal is the sentence of a difference (kind, name, fields).
func sameAsRendered(s *subject, obj client.Object, refusal string) (*verdict, error) {
	fp, err := render.FingerprintOf(obj)
	if err != nil {
		return nil, err
	}
	w := s.run.Status.Workload
	if fp.Digest == w.Digest {
		return nil, nil
	}
	changed := render.ChangedSince(w.FieldDigests, fp)
	what := strings.Join(changed, ", ")
	if len(changed) > 5 {
		what = strings.Join(changed[:5], ", ") + fmt.Sprintf(" and %d more", len(changed)-5)
	}
	switch {
	case w.FieldDigests == "":
		what = "a field the run recorded no digest of to name"
	case what == "":
		what = "a field whose short digest is unchanged"
	}
	return rejected(refusal, s.kind, obj.GetName(), what), nil
}

// runStillWanted: a cancelled or ended run's workload is admitted no more.
// It is asked before the workload is compared with what the run rendered:
// that alone refuses it, whatever changed (the cache keeps no field
// digests of an ended run, shared.CacheTransform).
func runStillWanted(_ context.Context, s *subject) (*verdict, error) {
	switch p := s.run.Status.Phase; {
	case s.run.Spec.Cancel:
		return rejected("run %s was cancelled", s.run.Name), nil
	case p == taugridv1.PhaseSucceeded || p == taugridv1.PhaseFailed || p == taugridv1.PhaseCancelled:
		return rejected("run %s has ended (%s)", s.run.Name, p), nil
	}
	return nil, nil
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}
