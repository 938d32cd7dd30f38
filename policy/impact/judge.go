package impact

import (
	"fmt"
	"slices"
	"strings"

	"github.com/taugrid/taugrid/render"
)

// judge says what the change does to one run, and false when nothing.
// A change never stops what Kueue admitted, nor takes back what it
// queued: an admitted run keeps running, a queued one is admitted as it
// was rendered if its queue can still admit it. The policy in force is
// read again when a run is submitted: at its first submission and at each
// retry.
func judge(old, new *Policy, nt *render.Tenant, r Run) (RunImpact, bool) {
	ri := RunImpact{Namespace: r.Namespace, Name: r.Name, Repository: r.Repository, Phase: r.Phase}
	refused := refusals(old, new, nt, r)
	switch {
	case !r.Submitted:
		// Its tau file is not read here: only what refuses any run of it.
		if len(refused) == 0 {
			return ri, false
		}
		ri.Outcome, ri.Why = NeverStarts, refused
	case r.Admitted:
		if len(refused) == 0 {
			return ri, false
		}
		ri.Outcome, ri.Why = RefusedOnRetry, refused
	default:
		if now := admission(new, r); now != "" && admission(old, r) == "" {
			ri.Outcome, ri.Why = NeverStarts, append([]string{now}, refused...)
			return ri, true
		}
		if len(refused) == 0 {
			return ri, false
		}
		ri.Outcome, ri.Why = StartsAsSubmitted, refused
	}
	return ri, true
}

// refusals are why the new policy would refuse the run's next
// submission, as render.Resolve would say it, for what the preview knows
// of the run.
func refusals(old, new *Policy, nt *render.Tenant, r Run) []string {
	if nt == nil {
		return []string{fmt.Sprintf("namespace %s belongs to no tenant", r.Namespace)}
	}
	var why []string
	if r.RepositoryURL != "" && !nt.AllowsRepository(r.RepositoryURL) {
		why = append(why, fmt.Sprintf("repository %s is not one tenant %s may register", r.RepositoryURL, nt.Name))
	}
	if !r.Submitted {
		return why
	}
	why = append(why, profileRefusal(new, nt, r)...)
	for _, img := range r.Images {
		if err := new.Images.CheckImage(img); err != nil {
			why = append(why, "image "+err.Error())
		}
	}
	if s := priorityRefusal(old, new, nt, r.PriorityClass); s != "" {
		why = append(why, s)
	}
	if r.Queue != "" && !slices.Contains(nt.Queues, r.Queue) {
		why = append(why, fmt.Sprintf("queue %s is not one of tenant %s's queues (%s)", r.Queue, nt.Name, strings.Join(nt.Queues, ", ")))
	}
	return why
}

// profileRefusal says why none of the profiles the run may be using would
// take it now; nil when one would, or when the profile is not known.
func profileRefusal(new *Policy, nt *render.Tenant, r Run) []string {
	var why []string
	for _, name := range r.Profiles {
		s := profileProblem(new, nt, name, r)
		if s == "" {
			return nil
		}
		why = append(why, s)
	}
	if len(why) > 1 {
		return []string{"its pods fit profiles " + strings.Join(r.Profiles, " or ") + ": " + strings.Join(why, "; ")}
	}
	return why
}

func profileProblem(new *Policy, nt *render.Tenant, name string, r Run) string {
	p := new.Profile(name)
	switch {
	case p == nil:
		return fmt.Sprintf("profile %s is removed", name)
	case !nt.MayUse(name):
		return fmt.Sprintf("profile %s is not offered to tenant %s", name, nt.Name)
	case r.GPUs > int64(p.MaxGPUs):
		return fmt.Sprintf("it asks %d GPUs; profile %s now allows %d", r.GPUs, name, p.MaxGPUs)
	case r.Pods > int64(p.MaxNodes)+1: // a RayJob's head is not a node
		return fmt.Sprintf("it has %d pods; profile %s now allows %d nodes", r.Pods, name, p.MaxNodes)
	}
	return ""
}

// priorityRefusal says why a run of this WorkloadPriorityClass could not
// ask for its priority again. A run of the old default class may have
// named no priority: it then gets the new default, and is not refused.
func priorityRefusal(old, new *Policy, nt *render.Tenant, class string) string {
	if class == "" {
		return ""
	}
	if d := old.DefaultPriority(); d != nil && d.Class == class {
		return ""
	}
	names := old.PriorityNames(class)
	allowed := new.AllowedPriorities(nt)
	for _, n := range names {
		if slices.Contains(allowed, n) && classOf(new, n) == class {
			return ""
		}
	}
	if len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("priority %s is not one tenant %s may use (%s)", strings.Join(names, "/"), nt.Name, strings.Join(allowed, ", "))
}
