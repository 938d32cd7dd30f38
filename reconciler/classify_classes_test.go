package reconciler

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/taugrid/taugrid/render"
)

// failureClasses are every class the reconciler gives a failed attempt.
var failureClasses = []FailureClass{FailureUserError, FailureOOMKilled, FailurePreempted, FailureNodeLost,
	FailureGPUFault, FailureImagePull, FailureTimeout, FailureInfrastructure}

// TestTheFailureClassesAreTheOnesRetryOnAccepts ties the reconciler's
// failure classes to tau.yaml's resilience.retry_on: the values render
// validates and the enum of the JSON Schema editors read. A class added on
// one side only would be one a researcher cannot retry, or one that never
// happens.
func TestTheFailureClassesAreTheOnesRetryOnAccepts(t *testing.T) {
	var ours []string
	for _, c := range failureClasses {
		ours = append(ours, string(c))
	}
	slices.Sort(ours)
	accepted := slices.Sorted(slices.Values(render.FailureClasses))
	if !slices.Equal(ours, accepted) {
		t.Errorf("reconciler classes %v, render.FailureClasses %v", ours, accepted)
	}
	f, _ := reflect.TypeFor[render.Resilience]().FieldByName("RetryOn")
	var enum []string
	for _, part := range strings.Split(f.Tag.Get("jsonschema"), ",") {
		if v, ok := strings.CutPrefix(part, "enum="); ok {
			enum = append(enum, v)
		}
	}
	slices.Sort(enum)
	if !slices.Equal(ours, enum) {
		t.Errorf("reconciler classes %v, the schema's retry_on enum %v", ours, enum)
	}
	for _, c := range render.DefaultRetryOn {
		if !slices.Contains(ours, c) {
			t.Errorf("the default retry_on names %s, which no failure has", c)
		}
	}
}
