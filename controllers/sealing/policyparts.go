package sealing

import (
	"sync"

	"github.com/taugrid/taugrid/render"
)

// policyPartsKept bounds policyParts: a platform's commits times its
// tenants, while runs rendered under them end. Past it, the parts start
// again from none.
const policyPartsKept = 64

// policyParts keeps the part of a policy that applied to a tenant
// (render.Policy.AppliedTo), written as policy files once per policy and
// tenant, not once per seal: every run a tenant ends under a commit puts
// the same files in its bundle (hack/scale: writing them was a sixth of a
// seal's CPU). A policy is the policy store's one parse of a commit, so a
// commit is one key however many runs name it. The files are shared by
// every bundle that holds them: read, never changed.
type policyParts struct {
	mu   sync.Mutex
	kept map[policyPart]map[string][]byte
}

type policyPart struct {
	policy *render.Policy
	tenant string
}

// of is the part of pol that applied to tenant.
func (p *policyParts) of(pol *render.Policy, tenant string) (map[string][]byte, error) {
	key := policyPart{pol, tenant}
	p.mu.Lock()
	files, ok := p.kept[key]
	p.mu.Unlock()
	if ok {
		return files, nil
	}
	files, err := pol.AppliedTo(tenant)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.kept == nil || len(p.kept) >= policyPartsKept {
		p.kept = map[policyPart]map[string][]byte{}
	}
	p.kept[key] = files
	return files, nil
}
