package policy

import (
	"context"
	"fmt"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"k8s.io/apimachinery/pkg/types"
)

// PolicyAt is a platform's whole policy at a commit, its kueue/ Topologies
// included, for an evidence bundle: parsed once per commit (Load), as the
// run reconciler rendered the run's attempts under it.
func (s *PolicyStore) PolicyAt(ctx context.Context, platform, commit string) (*render.Policy, error) {
	var p taugridv1.TauPlatform
	if err := s.Client.Get(ctx, types.NamespacedName{Name: platform}, &p); err != nil {
		return nil, fmt.Errorf("platform %s: %w", platform, err)
	}
	lp, err := s.Load(ctx, &p, commit)
	if err != nil {
		return nil, err
	}
	return lp.Policy, nil
}
