package policy

import (
	"context"
	"fmt"
	"io/fs"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"k8s.io/apimachinery/pkg/types"
)

// PolicyFiles reads the policy files (the .yaml files of the policy
// directory) of a platform at a commit, for an evidence bundle.
func (s *PolicyStore) PolicyFiles(ctx context.Context, platform, commit string) (map[string][]byte, error) {
	var p taugridv1.TauPlatform
	if err := s.Client.Get(ctx, types.NamespacedName{Name: platform}, &p); err != nil {
		return nil, fmt.Errorf("platform %s: %w", platform, err)
	}
	lp, err := s.Load(ctx, &p, commit)
	if err != nil {
		return nil, err
	}
	names, err := fs.Glob(lp.Tree, "*.yaml")
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	for _, n := range names {
		if out[n], err = fs.ReadFile(lp.Tree, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}
