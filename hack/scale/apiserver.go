package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cluster is what the harness reads of the cluster itself, beside the
// controller: the API server's requests by kind, and the nodes' health.
// The API server was this machine's ceiling in every run, so its request
// mix says whose load it is; a node that is not Ready says the harness's
// kubelets (kwok) are falling behind, which no real cluster's would do for
// the same reason.
type cluster struct {
	kube    *kubernetes.Clientset
	k8s     client.Client
	last    apiRequests
	lastCPU cpuTimes
}

// apiRequests are the API server's cumulative requests (apiserver_request_total)
// by verb, resource and subresource, at one moment.
type apiRequests struct {
	at    time.Time
	count map[string]float64
	// listed is what the API server's lists read, by where from and
	// resource ("etcd events", "cache pods"): the objects read and those
	// returned. A list the watch cache cannot serve reads every object
	// under its prefix from etcd, whatever its selector returns (Events
	// have no watch cache in kube-apiserver by default).
	listed map[string]listedObjects
}

type listedObjects struct{ lists, read, returned float64 }

// profile saves the API server's CPU profile over d to file (its
// /debug/pprof, on by default, read with the harness's admin credentials).
func (c *cluster) profile(ctx context.Context, file string, d time.Duration) error {
	body, err := c.kube.RESTClient().Get().AbsPath("/debug/pprof/profile").
		Param("seconds", strconv.Itoa(int(d.Seconds()))).Timeout(d + time.Minute).DoRaw(ctx)
	if err != nil {
		return err
	}
	return os.WriteFile(file, body, 0o644)
}

func (c *cluster) requests(ctx context.Context) (apiRequests, error) {
	r := apiRequests{at: time.Now(), count: map[string]float64{}, listed: map[string]listedObjects{}}
	body, err := c.kube.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return r, err
	}
	mfs, err := parseMetrics(bytes.NewReader(body))
	if err != nil {
		return r, err
	}
	for _, m := range mfs["apiserver_request_total"].GetMetric() {
		l := labelsOf(m)
		res := l["resource"]
		if sub := l["subresource"]; sub != "" {
			res += "/" + sub
		}
		r.count[l["verb"]+" "+res] += m.GetCounter().GetValue()
	}
	for _, from := range []struct{ where, prefix, label string }{
		{"etcd", "apiserver_storage_list_", "resource"},
		{"cache", "apiserver_cache_list_", "resource_prefix"},
	} {
		for _, part := range []string{"total", "fetched_objects_total", "returned_objects_total"} {
			for _, m := range mfs[from.prefix+part].GetMetric() {
				res := strings.TrimPrefix(labelsOf(m)[from.label], "/")
				key := from.where + " " + res
				o := r.listed[key]
				switch part {
				case "total":
					o.lists += m.GetCounter().GetValue()
				case "fetched_objects_total":
					o.read += m.GetCounter().GetValue()
				default:
					o.returned += m.GetCounter().GetValue()
				}
				r.listed[key] = o
			}
		}
	}
	return r, nil
}

// listCost is what the API server's lists read since prev, the most read
// first, for instance "etcd events: 10.2 lists a second read 31,200
// objects and returned 95".
func listCost(prev, cur apiRequests, secs float64, top int) string {
	read := map[string]float64{}
	for k, o := range cur.listed {
		if d := o.read - prev.listed[k].read; d > 0 {
			read[k] = d
		}
	}
	var parts []string
	for _, it := range largestFirst(read)[:min(top, len(read))] {
		o, p := cur.listed[it.key], prev.listed[it.key]
		parts = append(parts, fmt.Sprintf("%s: %.1f lists a second read %.0f objects and returned %.0f",
			it.key, (o.lists-p.lists)/secs, it.v/secs, (o.returned-p.returned)/secs))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// mix is the request rate since the previous call and its largest items,
// for instance "129/s: PATCH nodes/status 23.0, PUT leases 10.1, ...",
// and the requests counted since then.
func (c *cluster) mix(ctx context.Context, top int) (string, float64, error) {
	cur, err := c.requests(ctx)
	if err != nil {
		return "", 0, err
	}
	prev := c.last
	c.last = cur
	if prev.count == nil {
		return "first sample", 0, nil
	}
	secs := cur.at.Sub(prev.at).Seconds()
	rates := map[string]float64{}
	total := 0.0
	for k, v := range cur.count {
		if d := v - prev.count[k]; d > 0 {
			rates[k] = d / secs
			total += d / secs
		}
	}
	items := largestFirst(rates)
	parts := make([]string, 0, top)
	for _, it := range items[:min(top, len(items))] {
		parts = append(parts, fmt.Sprintf("%s %.1f", it.key, it.v))
	}
	return fmt.Sprintf("%.0f/s: %s; lists by what they read: %s", total, strings.Join(parts, ", "), listCost(prev, cur, secs, 3)), total * secs, nil
}

// unready counts the nodes whose Ready condition is not True, and those the
// node lifecycle controller tainted unreachable.
func (c *cluster) unready(ctx context.Context) (notReady, unreachable int, err error) {
	var nodes corev1.NodeList
	if err := c.k8s.List(ctx, &nodes); err != nil {
		return 0, 0, err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		ready := false
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				ready = cond.Status == corev1.ConditionTrue
			}
		}
		if !ready {
			notReady++
		}
		if slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.Key == corev1.TaintNodeUnreachable }) {
			unreachable++
		}
	}
	return notReady, unreachable, nil
}

// reportCluster logs the cluster's side since the last report: the API
// server's mix and its CPU per request, each component's share of the
// cores, the nodes not Ready, and where the runs not ended wait.
func (h *harness) reportCluster(ctx context.Context) {
	mix, requests, err := h.cluster.mix(ctx, 6)
	if err != nil {
		h.logf("API server metrics: %v", err)
		return
	}
	notReady, unreachable, err := h.cluster.unready(ctx)
	if err != nil {
		h.logf("nodes: %v", err)
		return
	}
	cpu, prev := readCPU("/proc", h.ctrl.clockTicks), h.cluster.lastCPU
	h.cluster.lastCPU = cpu
	h.logf("API server %s; nodes not Ready %d, tainted unreachable %d", mix, notReady, unreachable)
	if prev.cpu != nil && requests > 0 {
		apiCPU := cpu.cpu["kube-apiserver"] - prev.cpu["kube-apiserver"]
		h.logf("cores used: %s; the API server's CPU per request %.1f ms", cores(prev, cpu), float64(apiCPU.Microseconds())/1000/requests)
	}
	h.logf("%s; pod exits due and not yet written by the harness: %d", h.rec.waiting(time.Now()), h.exitsDue.Load())
	h.logf("the harness's watches since the last report: %s; TauRuns it has seen %s", h.watches.take(), h.seenOf(ctx))
}

// seenOf says how many TauRuns the harness's watch has seen against how
// many the cluster holds (one list of one item: its remaining count).
func (h *harness) seenOf(ctx context.Context) string {
	h.rec.mu.Lock()
	seen := len(h.rec.runs)
	h.rec.mu.Unlock()
	var l taugridv1.TauRunList
	if err := h.k8s.List(ctx, &l, client.Limit(1)); err != nil {
		return fmt.Sprintf("%d (the cluster's count: %v)", seen, err)
	}
	held := len(l.Items)
	if r := l.RemainingItemCount; r != nil {
		held += int(*r)
	}
	return fmt.Sprintf("%d of the cluster's %d", seen, held)
}
