package runs

import (
	"strings"
	"testing"

	"github.com/taugrid/taugrid/api/runname"

	"github.com/taugrid/taugrid/render"
	"k8s.io/apimachinery/pkg/util/validation"
)

func TestRunNameIsDeterministicDistinctAndShort(t *testing.T) {
	commit := strings.Repeat("a", 40)
	a := RunName("research", "refs/tags/run/a", commit, "default")
	if a != RunName("research", "refs/tags/run/a", commit, "default") {
		t.Error("the same trigger gave two names")
	}
	others := []string{
		RunName("research", "refs/tags/run/b", commit, "default"),
		RunName("research", "refs/tags/run/a", strings.Repeat("b", 40), "default"),
		RunName("research", "refs/tags/run/a", commit, "ray"),
		RunName("research2", "refs/tags/run/a", commit, "default"),
	}
	for _, o := range others {
		if o == a {
			t.Errorf("different triggers share the name %s", a)
		}
	}
	long := RunName(strings.Repeat("r", 80), "refs/tau/runs/x", commit, strings.Repeat("t", 63))
	for _, n := range append(others, a, long) {
		if len(n) > maxRunName || len(validation.IsDNS1123Label(n)) > 0 || len(render.WorkloadName(n, 101)) > render.MaxRayJobName {
			t.Errorf("%q is not a DNS label of at most %d characters", n, maxRunName)
		}
	}
	if !strings.HasPrefix(RunName("research", "r", commit, "ray"), "research-ray-") {
		t.Errorf("names should read repository-target-hash, got %s", RunName("research", "r", commit, "ray"))
	}
}

// Whatever a repository or target is called, the run's name is one the
// CRD accepts (the API server's half of this is in the fuzz corpus test).
func TestRunNamesAreLabelsWhateverTheInputs(t *testing.T) {
	commit := strings.Repeat("c", 40)
	for _, in := range [][2]string{
		{"exp.v2", "default"}, {"Research.Team", "Exp_V2"}, {"...", "..."}, {"a", "-"}, {"x--", "--y"},
		{strings.Repeat("é", 40), "ray"}, {"research", strings.Repeat("t", 63)},
	} {
		n := RunName(in[0], "refs/tau/runs/r", commit, in[1])
		if err := runname.ValidateRunName(n); err != nil || len(validation.IsDNS1123Label(n)) > 0 {
			t.Errorf("RunName(%q, %q) = %q: %v", in[0], in[1], n, err)
		}
	}
	if got := RunName("exp.v2", "r", commit, "default"); !strings.HasPrefix(got, "exp-v2-") {
		t.Errorf("a dotted repository should read exp-v2-<hash>, got %s", got)
	}
}
