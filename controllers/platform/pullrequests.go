package platform

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
	"github.com/taugrid/taugrid/policy/impact"
)

// Pull requests on the platform repo are previewed before they are merged.
const (
	// PreviewContext is the commit status (or check run) context of a
	// platform pull request's preview.
	PreviewContext = "tau/platform"
	// AcceptStranded, as a label of the pull request or a line of its
	// description, accepts that the change strands queued runs: the
	// preview then passes, still naming them.
	AcceptStranded = "tau/accept-stranded"
	// previewMarker marks the one comment each pull request gets.
	previewMarker = "<!-- tau/platform preview -->"
	// maxPlatformPulls is how many open pull requests are previewed,
	// the most recently opened.
	maxPlatformPulls = 20
)

// Reasons of the events of pull request previews.
const ReasonPreviewFailed = "PreviewFailed"

// previewPulls previews each open pull request on the platform repo whose
// head, acceptance or policy in force changed since its last preview, and
// records what it posted in status.previewedHeads. One pull request that
// fails transiently is tried again at the next poll, after the others; a
// forge that refuses TauGrid's token is a warning event, not a retry
// loop. Nothing is previewed before a policy is in force.
func (r *PlatformReconciler) previewPulls(ctx context.Context, p *taugridv1.TauPlatform, refs gitsource.RefSet) error {
	if p.Spec.Forge == nil || r.Posters == nil || p.Status.Commit == "" {
		p.Status.PreviewedHeads = nil
		return nil
	}
	var where forge.Status
	cfg, err := r.Posters.Config(ctx, p.Spec.Forge, r.Policies.Namespace, p.Spec.URL, &where, p.Spec.Forge.CheckRuns)
	if err == nil {
		var prs []forge.PullRequest
		if prs, err = forge.OpenPullRequests(ctx, cfg, where.Owner, where.Repo, maxPlatformPulls); err == nil {
			return r.previewOpen(ctx, p, refs, cfg, where, prs)
		}
	}
	if errors.Is(err, gitsource.ErrMissingSecret) || forge.IsTerminal(err) {
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, ReasonPreviewFailed, "Preview", "pull requests not previewed: %v", err)
		return nil
	}
	return fmt.Errorf("listing the platform repo's pull requests: %w", err)
}

// previewOpen previews the open pull requests prs not previewed yet.
func (r *PlatformReconciler) previewOpen(ctx context.Context, p *taugridv1.TauPlatform, refs gitsource.RefSet, cfg forge.Config, where forge.Status, prs []forge.PullRequest) error {
	inForce, err := r.Policies.Load(ctx, p, p.Status.Commit)
	if err != nil {
		return fmt.Errorf("reading the policy in force: %w", err)
	}
	queues, err := policy.LoadQueues(inForce.Tree, inForce.Policy)
	if err != nil { // it loaded when it was applied
		return fmt.Errorf("reading the queues in force: %w", err)
	}
	done := map[string]bool{}
	for _, k := range p.Status.PreviewedHeads {
		done[k] = true
	}
	pv := &previewer{r: r, p: p, cfg: cfg, where: where,
		inForce: &impact.Policy{Policy: inForce.Policy, Queues: queues, Commit: "the policy in force at " + shared.Short(p.Status.Commit)}}
	var kept []string
	var errs []error
	for _, pr := range prs {
		ref := pr.HeadRef(forge.Type(p.Spec.Forge.Type))
		head, ok := refs[ref]
		if !ok {
			continue // the forge has not advertised its head yet
		}
		accepted := accepts(pr)
		key := head.Commit() + "@" + p.Status.Commit
		if accepted {
			key += "+accepted"
		}
		if !done[key] {
			if err := pv.preview(ctx, pr, ref, head.Commit(), accepted); err != nil {
				errs = append(errs, fmt.Errorf("pull request #%d: %w", pr.Number, err))
				continue
			}
		}
		kept = append(kept, key)
	}
	slices.Sort(kept)
	p.Status.PreviewedHeads = kept
	return errors.Join(errs...)
}

// accepts reports a pull request that accepts stranding runs: by label,
// or by a line of its description.
func accepts(pr forge.PullRequest) bool {
	if slices.Contains(pr.Labels, AcceptStranded) {
		return true
	}
	for line := range strings.Lines(pr.Body) {
		if strings.TrimSpace(line) == AcceptStranded {
			return true
		}
	}
	return false
}

// previewer previews the pull requests of one poll against the policy
// in force, read once; the cluster is read once, on the first preview
// that needs it.
type previewer struct {
	r       *PlatformReconciler
	p       *taugridv1.TauPlatform
	cfg     forge.Config
	where   forge.Status
	inForce *impact.Policy
	cluster *impact.Cluster
}

// preview checks the policy at one pull request's head and posts its
// verdict: failing when the policy does not load, the cluster refuses an
// object it declares, or it strands queued runs and the pull request does
// not accept that. An error is transient: nothing conclusive was posted.
func (v *previewer) preview(ctx context.Context, pr forge.PullRequest, ref, head string, accepted bool) error {
	queues, lp, problem, err := v.check(ctx, ref, head)
	if err != nil {
		return err
	}
	st := v.where
	st.SHA, st.Context, st.State = head, PreviewContext, forge.StateSuccess
	var body string
	if problem != nil {
		st.State = forge.StateFailure
		st.Description = "policy refused: " + shared.FirstLine(problem.Error())
		body = refusedBody(head, v.p.Status.Commit, problem)
	} else {
		c, err := v.readCluster(ctx)
		if err != nil {
			return err
		}
		next := &impact.Policy{Policy: lp.Policy, Queues: queues, Commit: "this pull request at " + shared.Short(head)}
		pv := impact.Compute(v.inForce, next, c, accepted)
		st.Description = pv.Summary
		if pv.Failing() {
			st.State = forge.StateFailure
		}
		body = previewBody(head, v.p.Status.Commit, pv)
	}
	st.Description = forge.Shorten(st.Description, forge.MaxDescription)
	if v.cfg.CheckRuns {
		st.Summary = body
	}
	poster, err := v.r.Posters.New(v.cfg)
	if err != nil {
		return err
	}
	if _, err := poster.Post(ctx, st); err != nil {
		return err
	}
	return forge.UpsertComment(ctx, v.cfg, v.where.Owner, v.where.Repo, pr.Number, previewMarker, body)
}

// check loads the policy at head and has the cluster dry-run the Kueue
// objects it declares, as a push would be checked. problem is why the
// policy would be refused (file and line where known); err is a failure
// that may pass.
func (v *previewer) check(ctx context.Context, ref, head string) (queues []*unstructured.Unstructured, lp *policy.LoadedPolicy, problem, err error) {
	lp, problem = v.r.Policies.LoadAt(ctx, v.p, ref, head)
	if transient(problem) {
		return nil, nil, nil, problem
	}
	if problem != nil {
		return nil, nil, problem, nil
	}
	if queues, problem = policy.LoadQueues(lp.Tree, lp.Policy); problem != nil {
		return nil, nil, problem, nil
	}
	objs := slices.Clone(queues)
	problem = policy.CheckTopologyNodes(ctx, v.r.Client, lp.Policy)
	if problem == nil {
		objs, problem = withHostSlots(lp.Policy, objs)
	}
	if problem == nil && v.r.AdmissionCheck {
		objs, problem = withPolicyCheck(v.p, objs)
	}
	if problem == nil {
		problem = located(lp.Tree, v.r.dryRun(ctx, v.p, objs))
	}
	if transient(problem) {
		return nil, nil, nil, problem
	}
	return queues, lp, problem, nil
}

// dryRun has the API server and Kueue's webhooks check each object by a
// server-side dry run; an object in a namespace that does not exist yet
// (a tenant the change adds) is checked when it is applied.
func (r *PlatformReconciler) dryRun(ctx context.Context, p *taugridv1.TauPlatform, objs []*unstructured.Unstructured) error {
	exists := map[string]bool{}
	for _, u := range objs {
		u = u.DeepCopy()
		labelPlatform(u, p)
		if ns := u.GetNamespace(); ns != "" && u.GetKind() != "Namespace" {
			ok, seen := exists[ns]
			if !seen {
				err := r.Get(ctx, types.NamespacedName{Name: ns}, &corev1.Namespace{})
				if err != nil && !apierrors.IsNotFound(err) {
					return err
				}
				ok = err == nil
				exists[ns] = ok
			}
			if !ok {
				continue
			}
		}
		if err := r.apply(ctx, u, true); err != nil {
			return err
		}
	}
	return nil
}

// readCluster reads what the previews need from the cache, once a poll.
func (v *previewer) readCluster(ctx context.Context) (impact.Cluster, error) {
	if v.cluster == nil {
		c, err := impact.Read(ctx, v.r.Client, v.inForce.Policy)
		if err != nil {
			return c, err
		}
		v.cluster = &c
	}
	return *v.cluster, nil
}

// previewBody is the comment of a pull request whose policy loads.
func previewBody(head, inForce string, pv *impact.Preview) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### TauGrid: what this change does to the cluster\n\n")
	fmt.Fprintf(&b, "Head `%s` against the policy in force at `%s`, with the runs, queues and nodes the cluster holds now.\n\n", shared.Short(head), shared.Short(inForce))
	b.WriteString(pv.Body)
	if pv.Stranded {
		b.WriteString("\n\n")
		if pv.Accepted {
			fmt.Fprintf(&b, "This pull request accepts stranding these runs (`%s`).\n", AcceptStranded)
		} else {
			fmt.Fprintf(&b, "**This change strands queued runs**: they could never start under it. If that is intended, add the label `%s`, or a line `%s` to the description.\n", AcceptStranded, AcceptStranded)
		}
	}
	return b.String()
}

// refusedBody is the comment of a pull request whose policy would be
// refused: the error in full, with its files and lines.
func refusedBody(head, inForce string, problem error) string {
	return fmt.Sprintf("### TauGrid: this policy would be refused\n\nHead `%s` does not load or the cluster refuses it; merged, it would be refused and the policy in force at `%s` would stay.\n\n```\n%s\n```\n",
		shared.Short(head), shared.Short(inForce), strings.ReplaceAll(problem.Error(), "```", "'''"))
}
