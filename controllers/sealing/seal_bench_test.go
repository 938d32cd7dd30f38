package sealing

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkSealAnAttempt seals one ended attempt's bundle, as the evidence
// controller does for every run that ends: its Job, Workload and pod read,
// its tau file and policy rendered again, the bundle attested and stored
// (a FileStore). Each loop seals another run's, so none is sealed before.
// hack/scale's profiles: sealing was about a third of the controller's
// CPU while runs ended.
func BenchmarkSealAnAttempt(b *testing.B) {
	w := newSealWorld(b, nil, hfSecret(), researchRepo(), attemptJob(), attemptWorkload(), attemptPod(0), sealingRun().Obj())
	ctx := context.Background()
	if _, err := w.e.Reconcile(ctx, runR); err != nil { // the attestation key made, the policy parsed
		b.Fatal(err)
	}
	base := sealingRun().Obj()
	i := 0
	for b.Loop() {
		i++
		run := base.DeepCopy()
		run.Name = fmt.Sprintf("r%d", i)
		if !w.e.seal(ctx, run, []int{1}) {
			b.Fatalf("not sealed: %v", run.Status.Conditions)
		}
	}
}
