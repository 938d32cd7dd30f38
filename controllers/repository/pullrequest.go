package repository

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing/fstest"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource"
	"github.com/taugrid/taugrid/render"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/controllers/shared"
	"github.com/taugrid/taugrid/policy"
)

// ValidateContext is the commit status context of pull request validation.
const ValidateContext = "tau/validate"

// pullHeadRE matches the head refs forges advertise for pull and merge
// requests: refs/pull/<n>/head (GitHub, Gitea) and
// refs/merge-requests/<n>/head (GitLab).
var pullHeadRE = regexp.MustCompile(`^refs/(pull|merge-requests)/([0-9]+)/head$`)

// PullRequests validates the tau files a pull request changes and reports
// the verdict as a tau/validate status on its head commit: the same checks
// a run gets (strict parsing, the tenant's policy, a server-side dry run of
// what it would submit), before anything is merged or run.
type PullRequests struct {
	Client   client.Client
	Git      policy.Git
	Policies policy.PolicyProvider
	Posters  *forge.Posters // builds the poster from the repository's spec.forge
	// MaxTree is the largest source archive of a head validated; 0 means
	// maxPullRequestTree.
	MaxTree int64

	listings *shared.Memo[types.NamespacedName, pullListing] // see listed
}

// Bounds of pull request validation. Forges keep the head ref of every
// pull request that ever existed, so without them every poll would archive
// and validate all of them and status.validatedHeads would grow past what
// an object may hold.
const (
	// maxPullRequests is how many pull requests are validated: the most
	// recently opened of those the forge lists as open, or, where its API
	// does not list them, the highest-numbered head refs.
	maxPullRequests = 50
	// maxPullRequestTree is the largest source archive of a head that is
	// validated; a larger head gets a status saying so, and the others are
	// validated all the same.
	maxPullRequestTree = 256 << 20
	// maxTauFile bounds one tau file read from a head.
	maxTauFile = 1 << 20
)

// reconcilePullRequests validates the heads of open pull requests not
// validated yet and records them in status.validatedHeads, which holds
// only heads of pull requests still open (at most maxPullRequests). A head
// that cannot be validated (too large, gone) gets a status saying why; a
// transient failure is returned and retried at the next poll, after the
// other heads are done. refs is the poll's listing; nil lists again. The
// forge is asked which pull requests are open only when the head refs, the
// spec or status.validatedHeads changed since its last answer was all
// done, or that answer is pullListingRefresh intervals old (see listed).
func (p *PullRequests) reconcilePullRequests(ctx context.Context, repo *taugridv1.TauRepository, remote gitsource.Remote, refs gitsource.RefSet) error {
	if refs == nil {
		var err error
		if refs, err = p.Git.ListRefs(ctx, remote); err != nil {
			return err
		}
	}
	baseRef, base, ok := defaultBranch(refs)
	if !ok {
		return nil
	}
	pulls := pullHeads(refs)
	if len(pulls) == 0 { // nothing to validate, nothing to ask the forge
		repo.Status.ValidatedHeads = nil
		return nil
	}
	now := p.now()
	if p.listed(repo, pulls, now) {
		return nil
	}
	heads, err := p.openHeads(ctx, repo, refs)
	if err != nil {
		p.forget(client.ObjectKeyFromObject(repo))
		return err
	}
	done := map[string]bool{}
	for _, h := range repo.Status.ValidatedHeads {
		done[h] = true
	}
	validated := map[string]bool{}
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(heads)) {
		head := heads[name]
		if done[head] || validated[head] {
			validated[head] = true
			continue
		}
		if err := p.validate(ctx, repo, remote, name, head, baseRef, base); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		validated[head] = true
	}
	repo.Status.ValidatedHeads = slices.Sorted(maps.Keys(validated))
	if len(errs) > 0 {
		p.forget(client.ObjectKeyFromObject(repo))
		return errors.Join(errs...)
	}
	p.remember(repo, pulls, now)
	return nil
}

// openHeads maps the head refs to validate to their commits: those of the
// forge's open pull requests, or, where the forge's API will not list them
// (a token that may post statuses but not read pull requests), the
// maxPullRequests highest-numbered head refs.
func (p *PullRequests) openHeads(ctx context.Context, repo *taugridv1.TauRepository, refs gitsource.RefSet) (map[string]string, error) {
	prs, err := p.openPulls(ctx, repo)
	if forge.IsTerminal(err) {
		return NewestHeads(refs, maxPullRequests), nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing open pull requests: %w", err)
	}
	heads := map[string]string{}
	for _, pr := range prs {
		ref := pr.HeadRef(forge.Type(repo.Spec.Forge.Type))
		if r, ok := refs[ref]; ok { // the ref's commit, which is what is fetched
			heads[ref] = r.Commit()
		}
	}
	return heads, nil
}

// openPulls asks the forge named by spec.forge for its open pull requests.
func (p *PullRequests) openPulls(ctx context.Context, repo *taugridv1.TauRepository) ([]forge.PullRequest, error) {
	f := repo.Spec.Forge
	owner, name, root, err := forge.ParseRepoURL(repo.Spec.URL)
	if err != nil {
		return nil, err
	}
	var secret corev1.Secret
	if err := p.Client.Get(ctx, types.NamespacedName{Namespace: repo.Namespace, Name: f.SecretRef.Name}, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, &forge.ConfigError{Msg: fmt.Sprintf("Secret %s/%s not found", repo.Namespace, f.SecretRef.Name)}
		}
		return nil, err
	}
	cfg := forge.Config{Type: forge.Type(f.Type), APIURL: f.APIURL, Token: string(secret.Data[gitsource.SecretToken])}
	if fr := p.Posters; fr != nil {
		cfg.HTTPClient, cfg.Metrics, cfg.Clock = fr.HTTPClient, fr.Metrics, fr.Clock
		if cfg.APIURL == "" && cfg.Type == forge.GitHub {
			cfg.APIURL = fr.GitHubAPIURL
		}
		if cfg.Token == "" && f.CheckRuns {
			if cfg.Token, err = fr.AppToken(ctx, cmp.Or(cfg.APIURL, forge.DefaultGitHubAPI), secret.Data); err != nil {
				return nil, err
			}
		}
	}
	if cfg.APIURL == "" && cfg.Type != forge.GitHub {
		cfg.APIURL = root
	}
	return forge.OpenPullRequests(ctx, cfg, owner, name, maxPullRequests)
}

// NewestHeads are the n highest-numbered pull request head refs, the most
// recently opened, for forges whose API does not say which are open.
func NewestHeads(refs gitsource.RefSet, n int) map[string]string {
	type head struct {
		ref    string
		number int
	}
	var all []head
	for name := range refs {
		if m := pullHeadRE.FindStringSubmatch(name); m != nil {
			number, _ := strconv.Atoi(m[2])
			all = append(all, head{name, number})
		}
	}
	slices.SortFunc(all, func(a, b head) int { return cmp.Or(b.number-a.number, strings.Compare(a.ref, b.ref)) })
	out := map[string]string{}
	for _, h := range all[:min(n, len(all))] {
		out[h.ref] = refs[h.ref].Commit()
	}
	return out
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
// file gets no status. A head that cannot be read for a reason of its own
// (too large, gone, malformed) gets an error status saying so.
func (p *PullRequests) validate(ctx context.Context, repo *taugridv1.TauRepository, remote gitsource.Remote, ref, head, baseRef string, base gitsource.Ref) error {
	st := forge.Status{SHA: head, Context: ValidateContext, State: forge.StateSuccess}
	headTree, err := tauFiles(ctx, p.Git, remote, ref, head, cmp.Or(p.MaxTree, maxPullRequestTree))
	if err != nil {
		if !headTerminal(err) {
			return err
		}
		st.State, st.Description = forge.StateError, "not validated: "+shared.FirstLine(err.Error())
		return p.post(ctx, repo, st)
	}
	baseTree, err := tauFiles(ctx, p.Git, remote, baseRef, base.Commit(), math.MaxInt64)
	if err != nil {
		return fmt.Errorf("reading the default branch: %w", err)
	}
	changed := changedTauFiles(headTree, baseTree)
	if len(changed) == 0 {
		return nil
	}
	st.Description = fmt.Sprintf("%s valid under the platform policy", strings.Join(changed, ", "))
	if verdict := p.check(ctx, repo, headTree, changed); verdict != nil {
		st.State, st.Description = forge.StateFailure, shared.FirstLine(verdict.Error())
	}
	return p.post(ctx, repo, st)
}

// headTerminal: a failure of this head alone, which retrying cannot heal.
func headTerminal(err error) bool {
	for _, kind := range []error{policy.ErrTreeTooLarge, gitsource.ErrTooLarge, gitsource.ErrNotFound, gitsource.ErrRefMoved, gitsource.ErrCorrupt} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

func (p *PullRequests) post(ctx context.Context, repo *taugridv1.TauRepository, st forge.Status) error {
	poster, err := p.Posters.For(ctx, repo, &st, false)
	if err != nil {
		return err
	}
	st.Description = forge.Shorten(st.Description, forge.MaxDescription)
	_, err = poster.Post(ctx, st)
	return err
}

// tauFiles reads tau.yaml and tau/*.yaml at commit from its source
// archive, skipping every other file, so a large tree costs no memory. An
// archive over maxTree bytes is refused with errTreeTooLarge.
func tauFiles(ctx context.Context, g policy.Git, remote gitsource.Remote, ref, commit string, maxTree int64) (fstest.MapFS, error) {
	a, err := g.Archive(ctx, remote, ref, commit)
	if err != nil {
		return nil, err
	}
	if a.Size > maxTree {
		return nil, fmt.Errorf("%w: its source archive is %s, over the %s pull requests are validated up to",
			policy.ErrTreeTooLarge, sizeOf(a.Size), sizeOf(maxTree))
	}
	f, err := g.OpenArchive(a.Digest)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return policy.Unpack(f, commit, math.MaxInt64, maxTauFile, isTauFile)
}

// sizeOf is n bytes in KiB or MiB.
func sizeOf(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d MiB", n>>20)
}

// isTauFile: tau.yaml or tau/<target>.yaml, what changedTauFiles compares.
func isTauFile(name string) bool {
	if name == "tau.yaml" {
		return true
	}
	dir, file := path.Split(name)
	return dir == "tau/" && path.Ext(file) == ".yaml"
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
		if err := policy.CheckFeasible(ctx, p.Client, repo.Namespace, plan, objs); err != nil {
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
