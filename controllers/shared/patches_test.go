package shared

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A JSON patch refused because its test failed is the object moving on, not
// an error; a patch the API server finds invalid is one. The errors are as
// the API server answers each (k8s.io/apiserver's patch handler; the
// validation of a custom resource's status); TestAPatchTestFailsAsTheAPIServerSaysSo
// (controllers/integration) asks a real one.
func TestOnlyAFailedPatchTestIsTheObjectMovingOn(t *testing.T) {
	failedTest := apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", "testing value /status/admissionChecks/1/state failed", 0, false)
	invalid := apierrors.NewInvalid(schema.GroupKind{Group: "kueue.x-k8s.io", Kind: "Workload"}, "w",
		field.ErrorList{field.TooLong(field.NewPath("status", "admissionChecks").Index(1).Child("message"), "", 32768)})
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"a failed test", failedTest, true},
		{"a failed test, wrapped", fmt.Errorf("patching: %w", failedTest), true},
		{"an invalid status", invalid, false},
		{"a conflict", apierrors.NewConflict(schema.GroupResource{Group: "kueue.x-k8s.io", Resource: "workloads"}, "w", errors.New("changed")), false},
		{"no error", nil, false},
	} {
		if got := PatchTestFailed(tc.err); got != tc.want {
			t.Errorf("%s: PatchTestFailed = %v, want %v", tc.name, got, tc.want)
		}
	}
}
