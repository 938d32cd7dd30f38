package render

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// TestRetryOnsSchemaEnumIsTheRetryableClasses holds the one place the
// failure classes are written twice, RetryOn's jsonschema enum (a struct
// tag must be a literal), to taugridv1.RetryableFailureClasses: a class
// missing there would be one editors flag although render accepts it.
func TestRetryOnsSchemaEnumIsTheRetryableClasses(t *testing.T) {
	f, _ := reflect.TypeFor[Resilience]().FieldByName("RetryOn")
	var enum []string
	for _, part := range strings.Split(f.Tag.Get("jsonschema"), ",") {
		if v, ok := strings.CutPrefix(part, "enum="); ok {
			enum = append(enum, v)
		}
	}
	slices.Sort(enum)
	want := slices.Sorted(slices.Values(FailureClasses))
	if !slices.Equal(want, enum) {
		t.Errorf("the schema's retry_on enum %v, want the retryable classes %v", enum, want)
	}
}

// TestTheDefaultRetryOnIsRetryable: a default naming a class retry_on
// refuses would retry what a researcher cannot ask for.
func TestTheDefaultRetryOnIsRetryable(t *testing.T) {
	for _, c := range DefaultRetryOn {
		if !slices.Contains(FailureClasses, c) {
			t.Errorf("the default retry_on names %s, which retry_on refuses", c)
		}
	}
	if slices.Contains(FailureClasses, string(taugridv1.FailureIdleGPUs)) {
		t.Errorf("retry_on accepts %s: a retry would hold the idle GPUs again", taugridv1.FailureIdleGPUs)
	}
}
