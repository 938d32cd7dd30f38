package render

import (
	"fmt"
	"slices"
)

// Questions about a policy that tools outside render ask (the impact
// preview of a policy change): the same answers Resolve gives, without a
// tau file.

// Profile returns the profile with the given name, or nil.
func (p *Policy) Profile(name string) *Profile { return p.profile(name) }

// MayUse reports whether the tenant's runs may ask for the profile; the
// profile must also exist.
func (t *Tenant) MayUse(profile string) bool { return t.mayUse(profile) }

// AllowedPriorities are the priority names the tenant's runs may ask
// for: the default and those the tenant lists.
func (p *Policy) AllowedPriorities(t *Tenant) []string { return allowedPriorities(p, t) }

// PriorityNames are the names that map to a WorkloadPriorityClass.
func (p *Policy) PriorityNames(class string) []string {
	var names []string
	for _, pr := range p.Priorities {
		if pr.Class == class {
			names = append(names, pr.Name)
		}
	}
	return names
}

// DefaultPriority is the priority runs get when they name none, or nil.
func (p *Policy) DefaultPriority() *Priority {
	i := slices.IndexFunc(p.Priorities, func(pr Priority) bool { return pr.Default })
	if i < 0 {
		return nil
	}
	return &p.Priorities[i]
}

// CheckImage says why the allow-list refuses an image, as a run's pods
// get it; nil when it allows it.
func (im *ImagePolicy) CheckImage(image string) error {
	ref, err := qualifyImage(image)
	if err != nil {
		return err
	}
	if !im.allows(ref) {
		return fmt.Errorf("%s is not under any allowed registry or repository", ref)
	}
	if im.RequireDigest && !pinned(ref) {
		return fmt.Errorf("%s is not pinned by a digest, which images.yaml requires", ref)
	}
	return nil
}
