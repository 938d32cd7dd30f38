package reconciler

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/reconciler/forge"
	"github.com/taugrid/taugrid/render"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ValidateContext is the commit status context of pull request validation.
const ValidateContext = "tau/validate"

// pullHeadRE matches the head refs forges advertise for pull and merge
// requests: refs/pull/<n>/head (GitHub, Gitea) and
// refs/merge-requests/<n>/head (GitLab).
var pullHeadRE = regexp.MustCompile(`^refs/(pull|merge-requests)/[0-9]+/head$`)

// PullRequests validates the tau files a pull request changes and reports
// the verdict as a tau/validate status on its head commit: the same checks
// a run gets (strict parsing, the tenant's policy, a server-side dry run of
// what it would submit), before anything is merged or run.
type PullRequests struct {
	Client   client.Client
	Git      Git
	Policies PolicyProvider
	Forge    *ForgeReconciler // builds the poster from the repository's spec.forge
}

// reconcilePullRequests validates the heads of open pull requests not
// validated yet. It records them in status.validatedHeads.
func (p *PullRequests) reconcilePullRequests(ctx context.Context, repo *taugridv1.TauRepository, remote gitsource.Remote) error {
	refs, err := p.Git.ListRefs(ctx, remote)
	if err != nil {
		return err
	}
	baseRef, base, ok := defaultBranch(refs)
	if !ok {
		return nil
	}
	done := map[string]bool{}
	for _, h := range repo.Status.ValidatedHeads {
		done[h] = true
	}
	open := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(refs)) {
		if !pullHeadRE.MatchString(name) {
			continue
		}
		head := refs[name].Commit()
		open[head] = true
		if done[head] {
			continue
		}
		if err := p.validate(ctx, repo, remote, name, head, baseRef, base); err != nil {
			return err
		}
		done[head] = true
	}
	repo.Status.ValidatedHeads = nil
	for _, h := range slices.Sorted(maps.Keys(open)) {
		if done[h] {
			repo.Status.ValidatedHeads = append(repo.Status.ValidatedHeads, h)
		}
	}
	return nil
}

// defaultBranch is main, or master, and where it points.
func defaultBranch(refs gitsource.RefSet) (string, gitsource.Ref, bool) {
	for _, b := range []string{"refs/heads/main", "refs/heads/master"} {
		if r, ok := refs[b]; ok {
			return b, r, true
		}
	}
	return "", gitsource.Ref{}, false
}

// validate checks the tau files that differ between the pull request's head
// and the default branch, and posts the verdict; a head that changes no tau
// file gets no status.
func (p *PullRequests) validate(ctx context.Context, repo *taugridv1.TauRepository, remote gitsource.Remote, ref, head, baseRef string, base gitsource.Ref) error {
	headTree, err := treeFS(ctx, p.Git, remote, ref, head)
	if err != nil {
		return err
	}
	baseTree, err := treeFS(ctx, p.Git, remote, baseRef, base.Commit())
	if err != nil {
		return err
	}
	changed := changedTauFiles(headTree, baseTree)
	if len(changed) == 0 {
		return nil
	}
	verdict := p.check(ctx, repo, headTree, changed)
	st := forge.Status{SHA: head, Context: ValidateContext, State: forge.StateSuccess,
		Description: fmt.Sprintf("%s valid under the platform policy", strings.Join(changed, ", "))}
	if verdict != nil {
		st.State, st.Description = forge.StateFailure, firstLine(verdict.Error())
	}
	poster, err := p.Forge.posterFor(ctx, repo, &st, false)
	if err != nil {
		return err
	}
	st.Description = forge.Shorten(st.Description, forge.MaxDescription)
	_, err = poster.Post(ctx, st)
	return err
}

// changedTauFiles lists tau.yaml and tau/*.yaml files that the head adds
// or changes.
func changedTauFiles(head, base fs.FS) []string {
	var out []string
	files, _ := fs.Glob(head, "tau/*.yaml")
	for _, f := range append([]string{"tau.yaml"}, files...) {
		h, err := fs.ReadFile(head, f)
		if err != nil {
			continue
		}
		if b, err := fs.ReadFile(base, f); err != nil || !bytes.Equal(h, b) {
			out = append(out, f)
		}
	}
	return out
}

// check runs a run's checks on each file: parse, policy, and a server-side
// dry run of the objects it would submit. It returns the first problem.
func (p *PullRequests) check(ctx context.Context, repo *taugridv1.TauRepository, tree fs.FS, files []string) error {
	pol, _, err := p.Policies.Policy(ctx, repo.Spec.Platform)
	if err != nil {
		return err
	}
	tenant := pol.TenantForNamespace(repo.Namespace)
	if tenant == nil {
		return fmt.Errorf("namespace %s belongs to no tenant", repo.Namespace)
	}
	for _, f := range files {
		data, err := fs.ReadFile(tree, f)
		if err != nil {
			return err
		}
		rc, err := render.LoadConfig(f, data)
		if err != nil {
			return err
		}
		target := strings.TrimSuffix(path.Base(f), ".yaml")
		if f == "tau.yaml" {
			target = "default"
		}
		plan, err := render.Resolve(rc, pol, tenant.Name, render.Run{Name: "tau-validate", Repository: repo.Name,
			Commit: strings.Repeat("0", 40), Target: target, Attempt: 1})
		if err != nil {
			return err
		}
		objs := render.Render(plan)
		// The same check as at submission: a run the queue could never hold.
		if err := checkFeasible(ctx, p.Client, repo.Namespace, plan, objs); err != nil {
			return err
		}
		for _, o := range objs {
			if err := p.Client.Create(ctx, o, client.DryRunAll); err != nil {
				return fmt.Errorf("%s: the cluster refuses the %s it renders: %w", f, o.GetObjectKind().GroupVersionKind().Kind, err)
			}
		}
	}
	return nil
}
