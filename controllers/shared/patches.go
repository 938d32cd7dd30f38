package shared

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// PatchTestFailed: the API server refused a JSON patch (RFC 6902) because
// one of its test operations failed, the object no longer being as the
// patch was made for. It answers 422 with no cause; an object the patch
// would make invalid is refused with 422 too, but with its fields as
// causes, and is an error to report rather than a change to wait out.
func PatchTestFailed(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsInvalid(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || len(d.Causes) == 0
}
