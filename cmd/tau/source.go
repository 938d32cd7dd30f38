package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"
)

// runSource is where tau reads runs: the controller's API with a tenant
// token (no Kubernetes credentials needed), or the Kubernetes API with the
// user's kubeconfig.
type runSource interface {
	Namespace() string
	List(ctx context.Context) ([]taugridv1.TauRun, error)
	Get(ctx context.Context, id string) (*taugridv1.TauRun, error)
	Logs(ctx context.Context, id string, follow bool, tail int64, w io.Writer) error
	Diagnose(ctx context.Context, id string) (*runs.Diagnosis, error)
	Queue(ctx context.Context) (*runs.QueueReport, error)
}

type statusOptions struct {
	Kubeconfig string
	Namespace  string
	APIURL     string
	Output     string
}

func statusFlags(cmd *cobra.Command, o *statusOptions) {
	sourceFlags(cmd, o)
	cmd.Flags().StringVarP(&o.Output, "output", "o", "table", "table, json or yaml")
}

func sourceFlags(cmd *cobra.Command, o *statusOptions) {
	cmd.Flags().StringVar(&o.APIURL, "api-url", "", "the TauGrid API (default: $TAU_API_URL, else api_url in .tau/config.yaml if you logged in to it, else the API you logged in to); the token is $TAU_TOKEN or tau login's")
	cmd.Flags().StringVar(&o.Kubeconfig, "kubeconfig", "", "read runs with a kubeconfig instead of the API (default: $KUBECONFIG or ~/.kube/config)")
	cmd.Flags().StringVarP(&o.Namespace, "namespace", "n", "", "your team's namespace (default: .tau/config.yaml's, then the kubeconfig's)")
}

// openSource picks the API when one is configured and no kubeconfig was
// asked for, the kubeconfig otherwise. Which API, and which token goes
// there, is apiChoice's decision.
func openSource(o *statusOptions) (runSource, error) {
	project := loadProject(".")
	ns := firstOf(o.Namespace, project.Namespace)
	if o.Kubeconfig != "" {
		return kubeSourceFor(o.Kubeconfig, ns)
	}
	choice, err := userAPIChoice(o.APIURL)
	if err != nil {
		return nil, err
	}
	api, ok, err := choice.choose()
	switch {
	case err != nil:
		return nil, err
	case !ok:
		return kubeSourceFor("", ns)
	}
	// Without -n, the API names the token's namespace (whoami).
	return &apiSource{base: api.Base, token: api.Token, ns: ns, http: tokenClient(0)}, nil
}

func firstOf(vs ...string) string {
	for _, v := range vs {
		if v != "" {
			return v
		}
	}
	return ""
}

// apiSource reads the controller's runs API.
type apiSource struct {
	base, token string
	http        *http.Client

	mu sync.Mutex
	ns string // "" until asked of the API
}

func (a *apiSource) Namespace() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ns
}

// namespace is the namespace given, else the one the API says the token
// reads.
func (a *apiSource) namespace(ctx context.Context) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ns != "" {
		return a.ns, nil
	}
	ns, err := a.whoami(ctx)
	if err != nil {
		var nf notFoundError
		if errors.As(err, &nf) { // a controller older than whoami
			return "", usageError{errors.New("no namespace: pass -n <your team's namespace> or run `tau init` (this TauGrid API cannot tell a token's team)")}
		}
		return "", err
	}
	a.ns = ns
	return a.ns, nil
}

// whoami asks the API which namespace the token reads.
func (a *apiSource) whoami(ctx context.Context) (string, error) {
	resp, err := a.send(ctx, http.MethodGet, a.base+"/api/v1/whoami", nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var id runs.Identity
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&id); err != nil || id.Namespace == "" {
		return "", unreachableError{fmt.Errorf("the TauGrid API at %s did not name the token's namespace; pass -n", a.base)}
	}
	return id.Namespace, nil
}

func (a *apiSource) do(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	ns, err := a.namespace(ctx)
	if err != nil {
		return nil, err
	}
	return a.send(ctx, method, a.base+"/api/v1/namespaces/"+url.PathEscape(ns)+path, body)
}

// send makes one authenticated request and turns refusals into errors
// with the CLI's exit codes.
func (a *apiSource) send(ctx context.Context, method, u string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := a.http.Do(req)
	if err != nil {
		return nil, unreachableError{fmt.Errorf("cannot reach the TauGrid API at %s: %w", a.base, unwrapURLError(err))}
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		if e.Error == "" {
			e.Error = resp.Status
		}
		switch resp.StatusCode {
		case http.StatusNotFound:
			return nil, notFoundError{errors.New(e.Error)}
		case http.StatusUnauthorized, http.StatusForbidden:
			return nil, usageError{fmt.Errorf("the TauGrid API refused the token: %s", e.Error)}
		}
		return nil, unreachableError{fmt.Errorf("the TauGrid API answered %s: %s", resp.Status, e.Error)}
	}
	return resp, nil
}

func (a *apiSource) getJSON(ctx context.Context, path string, v any) error {
	resp, err := a.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return json.NewDecoder(resp.Body).Decode(v)
}

func (a *apiSource) List(ctx context.Context) ([]taugridv1.TauRun, error) {
	var list struct {
		Runs []taugridv1.TauRun `json:"runs"`
	}
	err := a.getJSON(ctx, "/runs", &list)
	return list.Runs, err
}

func (a *apiSource) Get(ctx context.Context, id string) (*taugridv1.TauRun, error) {
	run := &taugridv1.TauRun{}
	return run, a.getJSON(ctx, "/runs/"+url.PathEscape(id), run)
}

func (a *apiSource) Diagnose(ctx context.Context, id string) (*runs.Diagnosis, error) {
	d := &runs.Diagnosis{}
	return d, a.getJSON(ctx, "/runs/"+url.PathEscape(id)+"/diagnosis", d)
}

func (a *apiSource) Queue(ctx context.Context) (*runs.QueueReport, error) {
	rep := &runs.QueueReport{}
	return rep, a.getJSON(ctx, "/queue", rep)
}

func (a *apiSource) Logs(ctx context.Context, id string, follow bool, tail int64, w io.Writer) error {
	q := url.Values{}
	if follow {
		q.Set("follow", "true")
	}
	if tail >= 0 {
		q.Set("tail", strconv.FormatInt(tail, 10))
	}
	resp, err := a.do(ctx, http.MethodGet, "/runs/"+url.PathEscape(id)+"/logs?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	if ctx.Err() != nil {
		return nil // the user stopped following
	}
	return err
}

// Nudge asks the controller to poll the repository now, so a pushed run
// ref becomes a run without waiting for the poll interval.
func (a *apiSource) Nudge(ctx context.Context, repoURL string) error {
	b, _ := json.Marshal(map[string]string{"repository": repoURL})
	resp, err := a.do(ctx, http.MethodPost, "/nudge", strings.NewReader(string(b)))
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// kubeSource reads runs with the user's kubeconfig.
type kubeSource struct {
	c   client.Client
	cs  kubernetes.Interface // no timeout: log streams last as long as they are followed
	ns  string
	cfg string

	rules   *clientcmd.ClientConfigLoadingRules // where the kubeconfig was read, for workers' contexts
	timeout time.Duration                       // of each non-streaming request
}

// requestTimeout bounds each request tau makes with a kubeconfig, log
// streams excepted.
const requestTimeout = 30 * time.Second

func kubeSourceFor(kubeconfig, ns string) (*kubeSource, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if kubeconfig != "" {
		rules.ExplicitPath = kubeconfig
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{})
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, usageError{fmt.Errorf("no way to reach the cluster: log in to your TauGrid API (tau login --api-url <url>), or set TAU_API_URL and TAU_TOKEN, or use a kubeconfig (%w)", err)}
	}
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, usageError{err}
		}
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, taugridv1.AddToScheme, kueue.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	reads := rest.CopyConfig(cfg)
	reads.Timeout = requestTimeout
	c, err := client.New(reads, client.Options{Scheme: s})
	if err != nil {
		return nil, unreachableError{fmt.Errorf("cannot reach the cluster: %w", err)}
	}
	return &kubeSource{c: c, cs: cs, ns: ns, cfg: cfg.Host, rules: rules, timeout: requestTimeout}, nil
}

func (k *kubeSource) Namespace() string { return k.ns }

func (k *kubeSource) wrap(err error) error {
	var none *runs.ErrNoRun
	switch {
	case err == nil:
		return nil
	case errors.As(err, &none):
		return notFoundError{err}
	case isNetError(err):
		return unreachableError{fmt.Errorf("cannot reach the cluster at %s: %w", k.cfg, unwrapURLError(err))}
	}
	return err
}

func (k *kubeSource) List(ctx context.Context) ([]taugridv1.TauRun, error) {
	var list taugridv1.TauRunList
	if err := k.c.List(ctx, &list, client.InNamespace(k.ns)); err != nil {
		return nil, k.wrap(err)
	}
	runs.SortNewestFirst(list.Items)
	return list.Items, nil
}

func (k *kubeSource) Get(ctx context.Context, id string) (*taugridv1.TauRun, error) {
	run, err := runs.FindRun(ctx, k.c, k.ns, id)
	return run, k.wrap(err)
}

func (k *kubeSource) Diagnose(ctx context.Context, id string) (*runs.Diagnosis, error) {
	run, err := k.Get(ctx, id)
	if err != nil {
		return nil, err
	}
	rd, logs, err := k.podsOf(run)
	if err != nil {
		return nil, err
	}
	d, err := runs.Diagnose(ctx, rd, logs, run)
	return d, k.wrap(err)
}

func (k *kubeSource) Queue(ctx context.Context) (*runs.QueueReport, error) {
	rep, err := runs.ReportQueueAt(ctx, k.c, k.ns, clk.Now())
	return rep, k.wrap(err)
}

func (k *kubeSource) Logs(ctx context.Context, id string, follow bool, tail int64, w io.Writer) error {
	run, err := k.Get(ctx, id)
	if err != nil {
		return err
	}
	rd, logs, err := k.podsOf(run)
	if err != nil {
		return err
	}
	pod, err := runs.AttemptPod(ctx, rd, run)
	if err != nil {
		return k.wrap(err)
	}
	if pod == nil {
		return notFoundError{fmt.Errorf("run %s has no pod yet (%s)", id, strings.ToLower(string(run.Status.Phase)))}
	}
	opts := &corev1.PodLogOptions{Container: pod.Spec.Containers[0].Name, Follow: follow}
	if tail >= 0 {
		opts.TailLines = &tail
	}
	// Masked as the API masks it, with the Secrets of the cluster the pod
	// runs on. The kubeconfig is the reader's own: a Secret it may not read
	// is left unmasked, with a warning, as kubectl logs would show it all.
	mask, err := runs.SecretMasker(ctx, rd, k.ns, []corev1.Pod{*pod})
	if err != nil {
		fmt.Fprintf(os.Stderr, "tau: warning: %v below\n", err)
	}
	rc, err := logs.Logs(ctx, k.ns, pod.Name, opts)
	if err != nil {
		return k.wrap(err)
	}
	defer rc.Close()
	err = runs.CopyMasked(w, rc, mask)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func isNetError(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &ne) || errors.As(err, &oe) || strings.Contains(err.Error(), "connection refused")
}

func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
