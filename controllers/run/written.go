package run

import (
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"

	"github.com/taugrid/taugrid/controllers/shared"
)

// CacheLagsWrite reports a run whose cached copy is one that a status
// write of this process replaced (shared.Written): the run is looked at
// again after shared.CacheLag, with no patch sent that the API server
// would refuse.
func (r *RunReconciler) CacheLagsWrite(run *taugridv1.TauRun) bool {
	return shared.WrittenOf(&r.Written).Lags(run, r.Clock.Now())
}
