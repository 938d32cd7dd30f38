package smoke

import (
	"os"
	"testing"

	"github.com/taugrid/taugrid/render"
	"sigs.k8s.io/yaml"
)

func TestSmoke(t *testing.T) {
	pol, err := render.LoadPolicy(os.DirFS("/work/main/examples/platform"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tau.yaml", "tau/ray.yaml", "tau/ddp.yaml"} {
		data, _ := os.ReadFile("/work/main/examples/research/" + f)
		rc, err := render.LoadConfig(f, data)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := render.RenderConfig(rc, pol, "team-a", render.Run{Name: "r1", Commit: "abc", Target: "default", Attempt: 1, Repository: "research"})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range objs {
			b, _ := yaml.Marshal(o)
			t.Logf("%s\n---\n", b)
		}
	}
}
