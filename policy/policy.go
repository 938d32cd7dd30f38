package policy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/render"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PolicyStore reads platform policies from git and keeps the parsed policy
// of each commit. The cache is only a cache: everything in it can be read
// again from git at the commit a TauPlatform's status names.
type PolicyStore struct {
	Client client.Reader
	Git    Git
	// Namespace holds the Secrets of cluster-scoped TauPlatforms.
	Namespace string

	mu    sync.Mutex
	cache map[string]*LoadedPolicy // by commit and path
}

// LoadedPolicy is a platform's policy at one commit: parsed, and the
// directory it was read from.
type LoadedPolicy struct {
	Policy *render.Policy
	Tree   fs.FS // the policy directory
}

// ErrNoPolicyYet is a waiting error: the platform has no good commit yet.
var ErrNoPolicyYet = errors.New("the platform has no valid policy yet")

// Policy returns the policy in force for a platform: the one at the last
// good commit its status records.
func (s *PolicyStore) Policy(ctx context.Context, platform string) (*render.Policy, string, error) {
	var p taugridv1.TauPlatform
	if err := s.Client.Get(ctx, types.NamespacedName{Name: platform}, &p); err != nil {
		return nil, "", fmt.Errorf("platform %s: %w", platform, err)
	}
	if p.Status.Commit == "" {
		return nil, "", fmt.Errorf("platform %s: %w", platform, ErrNoPolicyYet)
	}
	lp, err := s.Load(ctx, &p, p.Status.Commit)
	if err != nil {
		return nil, "", err
	}
	return lp.Policy, p.Status.Commit, nil
}

// Load reads and validates a platform's policy at commit; an invalid policy
// returns render's located errors. A policy at a commit never changes, so
// it is read once: the credentials Secret is read only then, not on every
// run reconcile that asks for the policy.
func (s *PolicyStore) Load(ctx context.Context, p *taugridv1.TauPlatform, commit string) (*LoadedPolicy, error) {
	return s.LoadAt(ctx, p, RefName(p.Spec.Ref), commit)
}

// LoadAt is Load of a commit fetched by another ref than the platform's
// own: the head of a pull request (refs/pull/<n>/head) before it is
// merged.
func (s *PolicyStore) LoadAt(ctx context.Context, p *taugridv1.TauPlatform, ref, commit string) (*LoadedPolicy, error) {
	dir := p.Spec.Path
	key := commit + ":" + dir
	s.mu.Lock()
	lp, ok := s.cache[key]
	s.mu.Unlock()
	if ok {
		return lp, nil
	}
	remote, err := RemoteFor(ctx, s.Client, s.Namespace, p.Spec.GitSource)
	if err != nil {
		return nil, err
	}
	tree, err := treeFS(ctx, s.Git, remote, ref, commit)
	if err != nil {
		return nil, err
	}
	sub, err := fs.Sub(tree, dir)
	if err != nil {
		return nil, err
	}
	pol, err := render.LoadPolicy(sub)
	if err != nil {
		return nil, err
	}
	lp = &LoadedPolicy{Policy: pol, Tree: sub}
	s.mu.Lock()
	if s.cache == nil {
		s.cache = map[string]*LoadedPolicy{}
	}
	s.cache[key] = lp
	s.mu.Unlock()
	return lp, nil
}

// RefName turns a branch or tag name into the full ref gitsource fetches.
func RefName(ref string) string {
	if strings.HasPrefix(ref, "refs/") {
		return ref
	}
	return "refs/heads/" + ref
}
