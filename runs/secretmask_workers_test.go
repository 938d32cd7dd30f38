package runs

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/clusters"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// workerOnlyToken is the value of a Secret that exists on the worker only:
// the platform provisioned it there, the manager never held it.
const workerOnlyToken = "hf_worker_only_5e1d9c7b3a"

// echoingPod is a dispatched run's pod on a worker that reads Secret hf.
func echoingPod(ns string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1-1-0", Labels: map[string]string{render.LabelRun: "r1"}},
		Spec: corev1.PodSpec{NodeName: "gpu-1", Containers: []corev1.Container{{Name: "main", Env: []corev1.EnvVar{{Name: "HF_TOKEN",
			ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "hf"}, Key: "token"}}}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "main",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "token " + workerOnlyToken + " refused"}}}}}}
}

// echoLogs is a pod log that prints the token it was given.
type echoLogs struct{}

func (echoLogs) Logs(context.Context, string, string, *corev1.PodLogOptions) (io.ReadCloser, error) {
	return io.NopCloser(strings.NewReader("login with HF_TOKEN=" + workerOnlyToken + "\n401\n")), nil
}

func masksScheme(t *testing.T) *runtime.Scheme {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := taugridv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	return scheme
}

// A dispatched run's pod reads Secrets of its worker, which the manager
// may not hold at all: its log, read through the run's routed reader (as
// tau logs and tau diagnose read it, through the API or a kubeconfig), is
// masked with the worker's values.
func TestAWorkerOnlySecretIsMaskedInADispatchedRunsLogAndDiagnosis(t *testing.T) {
	scheme := masksScheme(t)
	ns := "team-a"
	run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1"}}
	manager := fake.NewClientBuilder().WithScheme(scheme).WithObjects(run).Build()
	worker := fake.NewClientBuilder().WithScheme(scheme).WithObjects(echoingPod(ns),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hf"}, Data: map[string][]byte{"token": []byte(workerOnlyToken)}}).Build()
	rd := clusters.Routed(manager, worker)

	m, err := SecretMasker(context.Background(), rd, ns, []corev1.Pod{*echoingPod(ns)})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	if err := CopyMasked(&out, strings.NewReader("HF_TOKEN="+workerOnlyToken+"\n"), m); err != nil || strings.Contains(out.String(), workerOnlyToken) {
		t.Errorf("the log as tau logs shows it: %q (%v); want the worker's Secret masked", out.String(), err)
	}
	d, err := Diagnose(context.Background(), rd, echoLogs{}, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Pods) != 1 || d.Pods[0].LogTail == "" {
		t.Fatalf("diagnosis pods %+v; want the worker's pod with its log tail", d.Pods)
	}
	if s := d.Pods[0].LogTail + d.Pods[0].Containers[0].State.Terminated.Message; strings.Contains(s, workerOnlyToken) {
		t.Errorf("tau diagnose shows the worker's Secret: %q", s)
	}
}

// A Secret the pods read that TauGrid is not allowed to read cannot be
// masked: the log is withheld (a clear error for tau logs, the log tails
// and termination messages left out of a diagnosis), never shown unmasked.
// A Secret that does not exist is no such risk: the pod cannot read it.
func TestAnUnreadableSecretWithholdsTheLogRatherThanShowIt(t *testing.T) {
	scheme := masksScheme(t)
	ns := "team-a"
	run := &taugridv1.TauRun{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "r1"}}
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if _, ok := obj.(*corev1.Secret); ok {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New("no RBAC"))
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(run, echoingPod(ns)).WithInterceptorFuncs(forbidden).Build()

	_, err := SecretMasker(context.Background(), c, ns, []corev1.Pod{*echoingPod(ns)})
	if !errors.Is(err, ErrUnmasked) || !strings.Contains(err.Error(), "Secret hf") {
		t.Errorf("SecretMasker: %v; want ErrUnmasked naming Secret hf", err)
	}
	d, err := Diagnose(context.Background(), c, echoLogs{}, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Pods) != 1 || d.Pods[0].LogTail != "" || d.Pods[0].Containers[0].State.Terminated.Message != "(withheld)" {
		t.Errorf("diagnosis pods %+v; want no log tail and the termination message withheld", d.Pods)
	}
	if len(d.Truncated) == 0 || !strings.Contains(strings.Join(d.Truncated, "; "), "withheld") {
		t.Errorf("the diagnosis does not say what it left out: %v", d.Truncated)
	}

	missing := fake.NewClientBuilder().WithScheme(scheme).Build()
	if _, err := SecretMasker(context.Background(), missing, ns, []corev1.Pod{*echoingPod(ns)}); err != nil {
		t.Errorf("a Secret that does not exist: %v; want it skipped", err)
	}
}
