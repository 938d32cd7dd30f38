package controlplane

import (
	"context"
	"fmt"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestKueueAdmitsASuspendedRayJobAndKubeRayCreatesItsCluster(t *testing.T) {
	env := sharedEnv(t)
	tn := setUpTenant(t, env.Client, 1)

	job := tn.suspendedRayJob("train")
	create(t, env.Client, job)

	eventually(t, admissionTimeout, func() (bool, string) {
		var got rayv1.RayJob
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &got); err != nil {
			t.Fatalf("getting the RayJob: %v", err)
		}
		if got.Spec.Suspend {
			return false, "RayJob still suspended: Kueue did not admit it"
		}
		if got.Status.RayClusterName == "" {
			return false, "RayJob admitted but KubeRay has not named its RayCluster"
		}
		var cluster rayv1.RayCluster
		key := client.ObjectKey{Namespace: tn.Namespace, Name: got.Status.RayClusterName}
		if err := env.Client.Get(context.Background(), key, &cluster); err != nil {
			return false, fmt.Sprintf("RayCluster %s: %v", key.Name, err)
		}
		return true, ""
	})
}
