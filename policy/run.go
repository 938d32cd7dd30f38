package policy

import (
	"context"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
)

// TauFileReader reads one file of a research repository at a commit, which
// ref pointed at.
type TauFileReader interface {
	ReadFile(ctx context.Context, repo *taugridv1.TauRepository, ref, commit, path string) ([]byte, error)
}

// PolicyProvider returns the platform policy in force and the commit it was
// read at.
type PolicyProvider interface {
	Policy(ctx context.Context, platform string) (*render.Policy, string, error)
}
