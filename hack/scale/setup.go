package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/forge"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Topology labels of the fake nodes, as a cloud's topology-aware scheduling
// labels them: nodes of a rack share a switch, racks of a block a spine.
const (
	labelBlock   = "cloud.provider.com/topology-block"
	labelRack    = "cloud.provider.com/topology-rack"
	nodesPerRack = 8
	racksPerBlk  = 4
)

// setupWorkers is how many objects the harness creates at once.
const setupWorkers = 32

// addNodes creates n kwok nodes of 8 H200s in blocks and racks,
// setupWorkers at once.
func (h *harness) addNodes(ctx context.Context) error {
	work := make(chan int)
	errs := make(chan error, h.cfg.nodes)
	var wg sync.WaitGroup
	for range setupWorkers {
		wg.Go(func() {
			for i := range work {
				n := controlplane.GPUNode(fmt.Sprintf("gpu-%04d", i))
				rack := i / nodesPerRack
				n.Labels[labelRack] = fmt.Sprintf("rack-%03d", rack)
				n.Labels[labelBlock] = fmt.Sprintf("block-%02d", rack/racksPerBlk)
				if err := h.k8s.Create(ctx, n); err != nil {
					errs <- fmt.Errorf("creating node %s: %w", n.Name, err)
				}
			}
		})
	}
	for i := range h.cfg.nodes {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	return <-errs
}

// tenant is one team: a namespace, a ClusterQueue in a cohort, repositories.
type tenant struct{ name string }

func (h *harness) tenants() []tenant {
	ts := make([]tenant, h.cfg.tenants)
	for i := range ts {
		ts[i] = tenant{name: fmt.Sprintf("team-%02d", i)}
	}
	return ts
}

// cohortOf puts tenants in cohorts of five, so idle quota is borrowed
// within a group of teams, as a platform shares a block between them.
func cohortOf(i int) string { return fmt.Sprintf("group-%d", i/5) }

// startGit serves bare repositories with the tests' `git http-backend`
// server, counting the requests it answers.
func (h *harness) startGit() error {
	h.gitRoot = filepath.Join(h.dir, "git")
	h.gitEnv = gittest.Env(filepath.Join(h.dir, "home"))
	h.git = &gittest.HTTPServer{Root: h.gitRoot}
	url, err := serve(h.git)
	h.gitURL = url
	return err
}

// platformFiles is the example platform with h's tenants: one ClusterQueue
// each with an equal share of the GPUs, in cohorts of five.
func (h *harness) platformFiles(src string) error {
	if err := os.CopyFS(src, os.DirFS(filepath.Join(h.root, "examples", "platform"))); err != nil {
		return err
	}
	gpus := h.cfg.nodes * 8 / h.cfg.tenants
	var tenants, queues, locals strings.Builder
	tenants.WriteString("tenants:\n")
	for i, t := range h.tenants() {
		fmt.Fprintf(&tenants, "- name: %s\n  namespace: %s\n  repositories: [\"http://127.0.0.1:*/%s/*\"]\n  queues: [runs]\n  default_profile: h200-1\n  profiles: [cpu, h200-1, h200-8]\n  service_account: %s\n", t.name, t.name, t.name, runnerAccount)
		fmt.Fprintf(&queues, `apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata:
  name: %s
spec:
  cohortName: %s
  namespaceSelector: {}
  queueingStrategy: BestEffortFIFO
  preemption:
    reclaimWithinCohort: Any
    withinClusterQueue: LowerPriority
  resourceGroups:
  - coveredResources: [cpu, memory, nvidia.com/gpu]
    flavors:
    - name: h200
      resources:
      - name: cpu
        nominalQuota: "%d"
      - name: memory
        nominalQuota: %dGi
      - name: nvidia.com/gpu
        nominalQuota: %d
---
`, t.name, cohortOf(i), gpus*28, gpus*256, gpus)
		fmt.Fprintf(&locals, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n---\napiVersion: kueue.x-k8s.io/v1beta2\nkind: LocalQueue\nmetadata:\n  name: runs\n  namespace: %s\nspec:\n  clusterQueue: %s\n---\n", t.name, t.name, t.name)
	}
	policy, err := os.ReadFile(filepath.Join(src, "tenants.yaml"))
	if err != nil {
		return err
	}
	head, _, _ := strings.Cut(string(policy), "tenants:\n")
	limits, err := os.ReadFile(filepath.Join(src, "limits.yaml"))
	if err != nil {
		return err
	}
	for file, text := range map[string]string{
		// The harness's control plane on a few cores starts the pods of
		// thousands of admitted Jobs more slowly than the example's
		// platform allows before it fails them as infrastructure faults.
		"limits.yaml":               fmt.Sprintf("%sstart_deadline: %s\n", limits, h.cfg.startDeadline),
		"tenants.yaml":              head + tenants.String(),
		"kueue/cluster-queues.yaml": queues.String(),
		"kueue/tenants.yaml":        locals.String(),
	} {
		if err := os.WriteFile(filepath.Join(src, file), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// pushRepos makes the platform repository and one research repository,
// copied to every tenant's M/tenants bare repositories (the same commit:
// what differs between teams is not what the controller's cost depends on).
func (h *harness) pushRepos() error {
	platform := filepath.Join(h.dir, "src", "platform")
	if err := h.platformFiles(platform); err != nil {
		return err
	}
	if _, err := h.push("platform", platform); err != nil {
		return err
	}
	research := filepath.Join(h.dir, "src", "research")
	if err := os.CopyFS(research, os.DirFS(filepath.Join(h.root, "examples", "research"))); err != nil {
		return err
	}
	first := h.repoPath(0)
	commit, err := h.push(first, research)
	if err != nil {
		return err
	}
	h.commit = commit
	for i := 1; i < h.cfg.repos; i++ {
		if err := os.CopyFS(filepath.Join(h.gitRoot, h.repoPath(i)+".git"), os.DirFS(filepath.Join(h.gitRoot, first+".git"))); err != nil {
			return err
		}
	}
	return nil
}

// repoPath is the i-th repository's path on the git server: tenants take
// repositories in turn.
func (h *harness) repoPath(i int) string {
	return fmt.Sprintf("%s/repo-%04d", h.tenants()[i%h.cfg.tenants].name, i)
}

// push commits src to a new bare repository and returns the commit.
func (h *harness) push(name, src string) (string, error) {
	bare := filepath.Join(h.gitRoot, name+".git")
	if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
		return "", err
	}
	if err := gittest.InitBare(h.gitEnv, bare); err != nil {
		return "", err
	}
	for _, args := range [][]string{
		{"init", "--quiet", "--initial-branch=main", src},
		{"-C", src, "add", "-A"},
		{"-C", src, "commit", "--quiet", "-m", "scale " + name},
		{"-C", src, "push", "--quiet", h.gitURL + "/" + name + ".git", "main"},
	} {
		if _, err := gittest.Git(h.gitEnv, "", nil, args...); err != nil {
			return "", err
		}
	}
	out, err := gittest.Git(h.gitEnv, "", nil, "-C", src, "rev-parse", "HEAD")
	return strings.TrimSpace(out), err
}

// register creates the TauPlatform, waits for its queues and namespaces,
// then creates each tenant's forge token and repositories, and waits for
// every repository's first poll (tags already there are history).
func (h *harness) register(ctx context.Context) error {
	c := h.k8s
	platform := &taugridv1.TauPlatform{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: taugridv1.TauPlatformSpec{GitSource: taugridv1.GitSource{URL: h.gitURL + "/platform.git"}, Ref: "main", Path: ".",
			Interval: metav1.Duration{Duration: time.Minute}},
	}
	if err := c.Create(ctx, platform); err != nil {
		return err
	}
	if err := waitFor(ctx, 3*time.Minute, "the tenants' namespaces", func() (bool, error) {
		var nss corev1.NamespaceList
		err := c.List(ctx, &nss)
		n := 0
		for _, ns := range nss.Items {
			if strings.HasPrefix(ns.Name, "team-") {
				n++
			}
		}
		return n == h.cfg.tenants, err
	}); err != nil {
		return err
	}
	for _, t := range h.tenants() {
		token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "forge-token", Namespace: t.name},
			StringData: map[string]string{"token": forgeToken}}
		runner := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: runnerAccount, Namespace: t.name}}
		for _, o := range []client.Object{token, runner} {
			if err := c.Create(ctx, o); err != nil {
				return err
			}
		}
	}
	if err := h.forEachRepo(func(i int) error { return c.Create(ctx, h.repository(i)) }); err != nil {
		return err
	}
	return waitFor(ctx, 10*time.Minute, "every repository's first poll", func() (bool, error) {
		var repos taugridv1.TauRepositoryList
		err := c.List(ctx, &repos)
		n := 0
		for _, r := range repos.Items {
			if r.Status.LastPollTime != nil {
				n++
			}
		}
		return n == h.cfg.repos, err
	})
}

// runnerAccount is the service account the tenants' runs use (no
// ServiceAccount controller runs here to make "default").
const runnerAccount = "tau-runner"

// forgeToken is the token the forge stand-in accepts.
const forgeToken = "scale-forge-token"

func (h *harness) repository(i int) *taugridv1.TauRepository {
	path := h.repoPath(i)
	ns, name, _ := strings.Cut(path, "/")
	return &taugridv1.TauRepository{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: h.gitURL + "/" + path + ".git"},
			Platform: "default", Interval: metav1.Duration{Duration: h.cfg.interval},
			Forge: &taugridv1.Forge{Type: taugridv1.ForgeType(forge.Gitea), APIURL: h.forgeURL, SecretRef: taugridv1.LocalObjectReference{Name: "forge-token"}}},
	}
}

// forEachRepo calls f for every repository index, setupWorkers at once.
func (h *harness) forEachRepo(f func(i int) error) error {
	work := make(chan int)
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range setupWorkers {
		wg.Go(func() {
			for i := range work {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range h.cfg.repos {
		work <- i
	}
	close(work)
	wg.Wait()
	return first
}

// waitFor polls done every 500 ms until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, done func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := done()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not there after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
