package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/gitsource/gittest"
	"github.com/taugrid/taugrid/hack/devcluster/cluster"
	"github.com/taugrid/taugrid/test/controlplane"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// demo holds what the demo started, so that cleanup stops all of it.
type demo struct {
	root     string
	dir      string
	cluster  *cluster.Cluster
	fleet    *fleet // the multicluster mode's manager and workers, instead of cluster
	k8s      client.Client
	kubecfg  string // the kubeconfig of the cluster the controller runs in
	gitURL   string
	git      *http.Server
	ctrl     *exec.Cmd
	ctrlLog  string
	started  time.Time
	research string // working copy of the research repo
	platform string // working copy of the platform repo
	gitEnv   []string
	apiURL   string // the controller's runs API
	tau      string // the tau binary
	// platformFiles are written into the platform repo before its first
	// commit (the multicluster mode's clusters.yaml), by path.
	platformFiles map[string]string
	platformEdits []edit   // and these edits of the example's files
	ctrlArgs      []string // further tau-controller flags
}

// demoToken is team-a's API token in the demo; a real platform team issues
// one per team (docs/operations.md).
const demoToken = "demo-team-a-token"

// run is the demo; mode "bench" measures the CLI afterwards, "recovery"
// shows a preempted run retried from its checkpoint, "multicluster" runs
// a MultiKueue manager and two workers instead of the local cluster (see
// multicluster.go), and the default shows a 2-node run placed in one rack.
func run(ctx context.Context, keep bool, mode string) (err error) {
	d := &demo{started: time.Now()}
	if d.root, err = controlplane.RepoRoot(); err != nil {
		return err
	}
	if d.dir, err = os.MkdirTemp("", "taugrid-demo-"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			d.showControllerLog() // before cleanup removes it
		}
		if !keep {
			err = errors.Join(err, d.cleanup())
		}
	}()
	steps := []struct {
		say string
		do  func(context.Context) error
	}{
		{"starting the local cluster (kwok fake H200 nodes in one block of two racks, Kueue, KubeRay)", d.startCluster},
		{"starting a local git server with the example platform and research repos", d.startGit},
		{"installing TauGrid's CRDs and starting tau-controller", d.startController},
		{"registering the platform repo (TauPlatform) and the research repo (TauRepository in team-a)", d.register},
	}
	if mode == "multicluster" {
		steps = d.fleetSteps()
	}
	for _, s := range steps {
		d.say("%s", s.say)
		if err := s.do(ctx); err != nil {
			return err
		}
	}
	if mode == "multicluster" {
		if err = d.multicluster(ctx); err == nil {
			d.say("done: the run went to the worker with free GPUs and its log streamed from there through tau logs")
		}
		return err
	}
	if err := d.runOnce(ctx); err != nil {
		return err
	}
	if err := d.runWithCLI(ctx); err != nil {
		return err
	}
	switch mode {
	case "bench":
		d.say("measuring the CLI")
		err = d.bench(ctx)
	case "recovery":
		err = d.recovery(ctx)
	default:
		err = d.topology(ctx)
	}
	if err == nil {
		d.usage()
	}
	return err
}

func (d *demo) say(format string, args ...any) {
	fmt.Printf("[%5.1fs] %s\n", time.Since(d.started).Seconds(), fmt.Sprintf(format, args...))
}

func (d *demo) startCluster(ctx context.Context) error {
	c, err := cluster.New()
	if err != nil {
		return err
	}
	d.cluster, d.kubecfg = c, c.Kubeconfig()
	if err := c.Up(ctx, indent(os.Stdout)); err != nil {
		return err
	}
	d.k8s, err = c.Client()
	if err == nil {
		err = taugridv1.AddToScheme(d.k8s.Scheme())
	}
	return err
}

// startGit serves bare repositories with `git http-backend` on loopback and
// pushes the example repos to it with the real git CLI.
func (d *demo) startGit(ctx context.Context) error {
	root := filepath.Join(d.dir, "git")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	d.git = &http.Server{Handler: &gittest.HTTPServer{Root: root}, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = d.git.Serve(l) }()
	d.gitURL = "http://" + l.Addr().String()
	d.gitEnv = gittest.Env(filepath.Join(d.dir, "home"))
	for _, repo := range []struct{ name, src string }{{"platform", "examples/platform"}, {"team-a/research", "examples/research"}} {
		work, err := d.push(repo.name, filepath.Join(d.root, repo.src), filepath.Join(root, repo.name+".git"))
		if err != nil {
			return err
		}
		if repo.name == "platform" {
			if err := d.commitPlatformFiles(work); err != nil {
				return err
			}
		}
		if repo.name == "team-a/research" {
			d.research = work
		} else {
			d.platform = work
		}
	}
	return nil
}

func (d *demo) push(name, src, bare string) (string, error) {
	work := filepath.Join(d.dir, "work", name)
	cmds := [][]string{
		{"init", "--quiet", "--initial-branch=main", work},
		{"-C", work, "add", "-A"},
		{"-C", work, "commit", "--quiet", "-m", "example " + name},
		{"-C", work, "remote", "add", "origin", d.gitURL + "/" + name + ".git"},
		{"-C", work, "push", "--quiet", "origin", "main"},
	}
	if err := os.MkdirAll(filepath.Dir(bare), 0o755); err != nil {
		return "", err
	}
	if err := gittest.InitBare(d.gitEnv, bare); err != nil {
		return "", err
	}
	for i, args := range cmds {
		if i == 1 {
			if err := os.CopyFS(work, os.DirFS(src)); err != nil {
				return "", err
			}
		}
		if _, err := gittest.Git(d.gitEnv, "", nil, args...); err != nil {
			return "", err
		}
	}
	return work, nil
}

// commitPlatformFiles adds d.platformFiles to the platform repo's working
// copy and pushes them.
func (d *demo) commitPlatformFiles(work string) error {
	if len(d.platformFiles) == 0 && len(d.platformEdits) == 0 {
		return nil
	}
	if err := applyEdits(work, d.platformEdits); err != nil {
		return err
	}
	for name, text := range d.platformFiles {
		p := filepath.Join(work, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"-C", work, "add", "-A"}, {"-C", work, "commit", "--quiet", "-m", "the fleet's workers"}, {"-C", work, "push", "--quiet", "origin", "main"}} {
		if _, err := gittest.Git(d.gitEnv, "", nil, args...); err != nil {
			return err
		}
	}
	return nil
}

// startController installs the CRDs and runs the real tau-controller binary
// against the cluster.
func (d *demo) startController(ctx context.Context) error {
	crds, err := controlplane.ReadCRDs(filepath.Join(d.root, "api", "crds"))
	if err != nil {
		return err
	}
	cfg, err := d.cluster.RESTConfig()
	if err != nil {
		return err
	}
	if err := controlplane.InstallCRDs(cfg, crds); err != nil {
		return err
	}
	return d.launchController(ctx)
}

// launchController builds tau-controller and tau and runs the controller
// against d.kubecfg, whose cluster has TauGrid's CRDs.
func (d *demo) launchController(ctx context.Context) error {
	bin := filepath.Join(d.dir, "tau-controller")
	d.tau = filepath.Join(d.dir, "tau")
	build := exec.CommandContext(ctx, "go", "build", "-o", d.dir+"/", "./cmd/tau-controller", "./cmd/tau")
	build.Dir, build.Stdout, build.Stderr = d.root, os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building tau-controller and tau: %w", err)
	}
	ports, err := controlplane.FreePorts(6)
	if err != nil {
		return err
	}
	d.ctrlLog = filepath.Join(d.dir, "tau-controller.log")
	log, err := os.Create(d.ctrlLog)
	if err != nil {
		return err
	}
	d.ctrl = exec.Command(bin, append([]string{
		"--kubeconfig", d.kubecfg,
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[0]),
		"--health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--webhook-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[2]),
		"--source-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[3]),
		"--source-url", fmt.Sprintf("http://127.0.0.1:%d", ports[3]),
		"--api-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[4]),
		"--cache-dir", filepath.Join(d.dir, "cache"),
		"--evidence-bind-address", fmt.Sprintf("127.0.0.1:%d", ports[5]),
		"--evidence-url", fmt.Sprintf("http://127.0.0.1:%d", ports[5]),
		"--evidence-dir", filepath.Join(d.dir, "evidence"),
		"--namespace", "default"}, d.ctrlArgs...)...)
	d.apiURL = fmt.Sprintf("http://127.0.0.1:%d", ports[4])
	d.ctrl.Stdout, d.ctrl.Stderr = log, log
	d.ctrl.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := d.ctrl.Start(); err != nil {
		return err
	}
	return waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", ports[1]), 60*time.Second)
}

// register creates the TauPlatform and the TauRepository, and waits for the
// platform's policy to be in force.
func (d *demo) register(ctx context.Context) error {
	platform := &taugridv1.TauPlatform{
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: taugridv1.TauPlatformSpec{GitSource: taugridv1.GitSource{URL: d.gitURL + "/platform.git"}, Ref: "main", Path: ".",
			Interval: metav1.Duration{Duration: 5 * time.Second}},
	}
	repo := &taugridv1.TauRepository{
		ObjectMeta: metav1.ObjectMeta{Name: "research", Namespace: "team-a"},
		Spec: taugridv1.TauRepositorySpec{GitSource: taugridv1.GitSource{URL: d.gitURL + "/team-a/research.git"},
			Platform: "default", Interval: metav1.Duration{Duration: 2 * time.Second}},
	}
	token := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "team-a-api-token", Namespace: "default", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
		Data:       map[string][]byte{taugridv1.APITokenKey: []byte(demoToken), taugridv1.APINamespaceKey: []byte("team-a")},
	}
	for _, o := range []client.Object{platform, repo, token} {
		if err := d.k8s.Create(ctx, o); err != nil {
			return err
		}
	}
	err := d.poll(ctx, 60*time.Second, func() (bool, string, error) {
		p := &taugridv1.TauPlatform{}
		if err := d.k8s.Get(ctx, types.NamespacedName{Name: "default"}, p); err != nil {
			return false, "", err
		}
		if p.Status.Commit != "" {
			return true, fmt.Sprintf("platform policy in force at commit %.12s", p.Status.Commit), nil
		}
		if c := apimeta.FindStatusCondition(p.Status.Conditions, taugridv1.ConditionStalled); c != nil && c.Status == metav1.ConditionTrue {
			return false, "", fmt.Errorf("the platform refused its commit: %s", c.Message)
		}
		return false, "", nil
	})
	if err != nil {
		return err
	}
	// Tags already in a repository when it is registered are history, not
	// requests: wait for the first poll before pushing one.
	return d.poll(ctx, 60*time.Second, func() (bool, string, error) {
		r := &taugridv1.TauRepository{}
		if err := d.k8s.Get(ctx, client.ObjectKeyFromObject(repo), r); err != nil {
			return false, "", err
		}
		return r.Status.LastPollTime != nil, "research repo watched", nil
	})
}

// runOnce pushes a run tag and follows the run to the end.
func (d *demo) runOnce(ctx context.Context) error {
	tag := "run/demo-" + time.Now().UTC().Format("20060102-150405")
	for _, args := range [][]string{{"-C", d.research, "tag", tag}, {"-C", d.research, "push", "--quiet", "origin", tag}} {
		if _, err := gittest.Git(d.gitEnv, "", nil, args...); err != nil {
			return err
		}
	}
	d.say("git push origin %s  (the researcher's only step)", tag)
	ref := "refs/tags/" + tag
	last, page := "", ""
	err := d.poll(ctx, 3*time.Minute, func() (bool, string, error) {
		var runs taugridv1.TauRunList
		if err := d.k8s.List(ctx, &runs, client.InNamespace("team-a")); err != nil {
			return false, "", err
		}
		for _, r := range runs.Items {
			if r.Spec.Trigger.Ref != ref || r.Status.Phase == "" {
				continue // not yet seen by the run reconciler
			}
			line := fmt.Sprintf("TauRun %s: %s", r.Name, strings.ToLower(string(r.Status.Phase)))
			if msg := r.Status.Message; msg != "" && !strings.EqualFold(msg, string(r.Status.Phase)) {
				line += " (" + r.Status.Message + ")"
			}
			if line != last {
				last = line
				d.say("%s", line)
			}
			switch r.Status.Phase {
			case taugridv1.PhaseSucceeded:
				page = r.Status.EvidenceURL
				return true, "", nil
			case taugridv1.PhaseFailed, taugridv1.PhaseCancelled:
				return false, "", fmt.Errorf("the run ended %s: %s", r.Status.Phase, r.Status.Message)
			}
		}
		return false, "", nil
	})
	if err != nil {
		return fmt.Errorf("%w (controller log: %s)", err, d.ctrlLog)
	}
	if err := d.evidence(ctx, page); err != nil {
		return fmt.Errorf("%w (controller log: %s)", err, d.ctrlLog)
	}
	return nil
}

// runWithCLI does what a researcher does with tau: run and follow to the
// end, list, retry. tau reads the controller's API with the team's token;
// no kubeconfig is involved.
func (d *demo) runWithCLI(ctx context.Context) error {
	d.say("tau run --wait  (the same, with the CLI: pushes a run ref and follows it through the controller's API)")
	out, err := d.tauCmd(ctx, "run", "--wait")
	if err != nil {
		return err
	}
	id := ""
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "r-") {
			id = f
			break
		}
	}
	d.say("tau retry %s  (a new run of the same commit and target)", id)
	out, err = d.tauCmd(ctx, "retry", id)
	if err != nil {
		return err
	}
	retried := ""
	if _, after, ok := strings.Cut(out, " as "); ok {
		retried = strings.TrimSuffix(strings.Fields(after)[0], ":")
	}
	d.say("tau status -w %s", retried)
	if _, err := d.tauCmd(ctx, "status", "-w", retried); err != nil {
		return err
	}
	d.say("tau list")
	if _, err = d.tauCmd(ctx, "list"); err != nil {
		return err
	}
	return d.board(ctx)
}

// board reads the team board as a browser signed in with the team's token
// would, and says where it is.
func (d *demo) board(ctx context.Context) error {
	u := d.apiURL + "/teams/team-a"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+demoToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("the team board: %w", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "Succeeded: ") {
		return fmt.Errorf("the team board %s answered %s:\n%.400s", u, resp.Status, body)
	}
	d.say("the team board: %s (sign in at %s/login with the team's token %s)", u, d.apiURL, demoToken)
	return nil
}

// usage says how to use the cluster the demo leaves with --keep.
func (d *demo) usage() {
	d.say("done. With the cluster kept (go run ./hack/demo --keep), use it with:")
	fmt.Printf("    export TAU_API_URL=%s TAU_TOKEN=%s\n    cd %s && %s list -n team-a; %s run --wait -n team-a\n",
		d.apiURL, demoToken, d.research, d.tau, d.tau)
	fmt.Printf("    export KUBECONFIG=%s\n    kubectl get tau -A; kubectl get jobs,workloads -n team-a\n", d.kubecfg)
	fmt.Printf("    the team board: %s/teams/team-a (sign in with the token above)\n", d.apiURL)
}

// tauCmd runs the tau binary in the research working copy, as team-a,
// printing its output indented; its exit code must be 0.
func (d *demo) tauCmd(ctx context.Context, args ...string) (string, error) {
	var buf bytes.Buffer
	cmd := exec.CommandContext(ctx, d.tau, append(args, "-n", "team-a")...)
	cmd.Dir = d.research
	cmd.Env = append(append(os.Environ(), d.gitEnv...), "TAU_API_URL="+d.apiURL, "TAU_TOKEN="+demoToken, "NO_COLOR=1")
	cmd.Stdout = io.MultiWriter(&buf, indent(os.Stdout))
	cmd.Stderr = indent(os.Stderr)
	if err := cmd.Run(); err != nil {
		return buf.String(), fmt.Errorf("tau %s: %w (controller log: %s)", strings.Join(args, " "), err, d.ctrlLog)
	}
	return buf.String(), nil
}

// poll calls check every 250 ms until it reports done, printing its message.
func (d *demo) poll(ctx context.Context, timeout time.Duration, check func() (bool, string, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		done, msg, err := check()
		if err != nil {
			return err
		}
		if done {
			if msg != "" {
				d.say("%s", msg)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func (d *demo) cleanup() error {
	var errs []error
	if d.ctrl != nil && d.ctrl.Process != nil {
		_ = syscall.Kill(-d.ctrl.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = d.ctrl.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(-d.ctrl.Process.Pid, syscall.SIGKILL)
		}
	}
	if d.git != nil {
		errs = append(errs, d.git.Close())
	}
	if d.fleet != nil {
		d.say("stopping the manager and the workers")
		errs = append(errs, d.fleet.stop())
	}
	if d.cluster != nil {
		d.say("stopping the local cluster")
		errs = append(errs, d.cluster.Down(context.Background(), indent(os.Stdout)))
	}
	errs = append(errs, os.RemoveAll(d.dir))
	return errors.Join(errs...)
}

// controllerLogTail is how much of the controller's log a failed demo
// prints: the log itself goes with the demo's directory.
const controllerLogTail = 80

// showControllerLog prints the end of tau-controller's log to stderr.
func (d *demo) showControllerLog() {
	data, err := os.ReadFile(d.ctrlLog)
	if err != nil || len(data) == 0 {
		return
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	lines = lines[max(0, len(lines)-controllerLogTail):]
	fmt.Fprintf(os.Stderr, "the last %d lines of the controller's log (%s):\n%s\n", len(lines), d.ctrlLog, strings.Join(lines, "\n"))
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready after %s", url, timeout)
}

// indent prefixes a sub-step's output so the demo's own lines stand out.
func indent(w io.Writer) io.Writer { return &prefixWriter{w: w} }

type prefixWriter struct{ w io.Writer }

func (p *prefixWriter) Write(b []byte) (int, error) {
	lines := bytes.SplitAfter(b, []byte("\n"))
	for _, l := range lines {
		if len(l) > 0 {
			if _, err := p.w.Write(append([]byte("          "), l...)); err != nil {
				return 0, err
			}
		}
	}
	return len(b), nil
}

// evidence waits for the run's evidence page to list its sealed bundle.
func (d *demo) evidence(ctx context.Context, page string) error {
	if page == "" {
		return errors.New("the run has no evidence URL")
	}
	return d.poll(ctx, 30*time.Second, func() (bool, string, error) {
		// The page's JSON: the same path with .json, the same signed query.
		u, err := url.Parse(page)
		if err != nil {
			return false, "", err
		}
		u.Path += ".json"
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
		if err != nil {
			return false, "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, "", nil
		}
		defer resp.Body.Close()
		var v struct {
			Bundles []struct{ Digest string } `json:"bundles"`
		}
		if json.NewDecoder(resp.Body).Decode(&v) != nil || len(v.Bundles) == 0 {
			return false, "", nil
		}
		return true, fmt.Sprintf("evidence sealed (%s): %s", v.Bundles[0].Digest[:19], page), nil
	})
}

// edit replaces old with new in file, once.
type edit struct{ file, old, new string }

// applyEdits edits files under dir, failing if one no longer holds its old
// text.
func applyEdits(dir string, edits []edit) error {
	for _, e := range edits {
		p := filepath.Join(dir, e.file)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !strings.Contains(string(data), e.old) {
			return fmt.Errorf("examples/platform/%s no longer holds %q, which the demo edits", e.file, e.old)
		}
		if err := os.WriteFile(p, []byte(strings.Replace(string(data), e.old, e.new, 1)), 0o644); err != nil {
			return err
		}
	}
	return nil
}
