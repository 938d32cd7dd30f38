package clusters

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Routed is the reader of a dispatched run's read side: pods, nodes and
// Secrets from the worker its attempt runs on (its pods read the worker's
// Secrets, whatever the manager holds under the same names: masking their
// logs needs those values), events from both (the run's, its Job's and its
// Workload's are the manager's; its pods' are the worker's), everything
// else (runs, Workloads) from the manager.
// Event lists are paged through both clusters, each with its own
// continue token.
func Routed(manager, worker client.Reader) client.Reader {
	return &routed{manager: manager, worker: worker}
}

type routed struct{ manager, worker client.Reader }

// onWorker reports the kinds whose objects are the worker's alone.
func onWorker(obj runtime.Object) bool {
	switch obj.(type) {
	case *corev1.Pod, *corev1.PodList, *corev1.Node, *corev1.NodeList, *corev1.Secret, *corev1.SecretList:
		return true
	}
	return false
}

func (r *routed) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if onWorker(obj) {
		return r.worker.Get(ctx, key, obj, opts...)
	}
	return r.manager.Get(ctx, key, obj, opts...)
}

func (r *routed) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	switch list.(type) {
	case *eventsv1.EventList, *corev1.EventList:
		return r.listBoth(ctx, list, opts)
	}
	if onWorker(list) {
		return r.worker.List(ctx, list, opts...)
	}
	return r.manager.List(ctx, list, opts...)
}

// pages are where a paged list of both clusters stands: each cluster's
// continue token, and which are done.
type pages struct {
	Tokens [2]string `json:"t,omitempty"`
	Done   [2]bool   `json:"d,omitempty"`
}

// listBoth lists a page of each cluster into list, the manager's items
// first, and sets its continue token to where both stand.
func (r *routed) listBoth(ctx context.Context, list client.ObjectList, opts []client.ListOption) error {
	lo := (&client.ListOptions{}).ApplyOptions(opts)
	var at pages
	if lo.Continue != "" {
		raw, err := base64.RawURLEncoding.DecodeString(lo.Continue)
		if err != nil || json.Unmarshal(raw, &at) != nil {
			return errors.New("not a continue token of this list")
		}
	}
	var merged []runtime.Object
	for i, c := range []client.Reader{r.manager, r.worker} {
		if at.Done[i] {
			continue
		}
		page := list.DeepCopyObject().(client.ObjectList)
		pageOpts := *lo
		pageOpts.Continue = at.Tokens[i]
		if err := c.List(ctx, page, &pageOpts); err != nil {
			return err
		}
		items, err := meta.ExtractList(page)
		if err != nil {
			return err
		}
		merged = append(merged, items...)
		at.Tokens[i], at.Done[i] = page.GetContinue(), page.GetContinue() == ""
	}
	if err := meta.SetList(list, merged); err != nil {
		return err
	}
	cont := ""
	if !at.Done[0] || !at.Done[1] {
		raw, _ := json.Marshal(at)
		cont = base64.RawURLEncoding.EncodeToString(raw)
	}
	list.SetContinue(cont)
	return nil
}
