package render

import (
	"os"
	"path/filepath"
	"testing"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FuzzRender feeds arbitrary bytes through parse, validate, resolve and
// render. Nothing may panic; whatever renders must be suspended and queued,
// and every container must name its image fully qualified, as the
// allow-list judged it.
func FuzzRender(f *testing.F) {
	for _, glob := range []string{"testdata/valid/*.yaml", "testdata/invalid/*.yaml", "../examples/research/tau/*.yaml", "../examples/research/tau.yaml"} {
		files, _ := filepath.Glob(glob)
		for _, path := range files {
			data, err := os.ReadFile(path)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data)
		}
	}
	pol := examplePolicy(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := renderFile(pol, "tau.yaml", data)
		if err != nil {
			if len(Errors(err)) == 0 {
				t.Fatalf("error is not located: %v", err)
			}
			return
		}
		switch w := objs[0].(type) {
		case *batchv1.Job:
			if !*w.Spec.Suspend || w.Labels[LabelQueueName] == "" {
				t.Fatal("rendered a Job that bypasses Kueue")
			}
		case *rayv1.RayJob:
			if !w.Spec.Suspend || w.Labels[LabelQueueName] == "" {
				t.Fatal("rendered a RayJob that bypasses Kueue")
			}
		default:
			t.Fatalf("first object is %T, want the workload", objs[0])
		}
		checkImagesQualified(t, &pol.Images, objs)
		out, err := Marshal(objs, FormatYAML)
		if err != nil {
			t.Fatal(err)
		}
		writesAsBefore(t, objs, out)
	})
}

// checkImagesQualified: every container's image is written as the node
// will read it, and the run's own images are allowed.
func checkImagesQualified(t *testing.T, im *ImagePolicy, objs []client.Object) {
	t.Helper()
	for _, c := range containers(objs) {
		ref, err := qualifyImage(c.Image)
		switch {
		case err != nil || ref.String() != c.Image:
			t.Fatalf("container %s runs %q, not a fully qualified name", c.Name, c.Image)
		case c.Name != "tau-source" && !im.allows(ref):
			t.Fatalf("container %s runs %q, which the allow-list refuses", c.Name, c.Image)
		}
	}
}
