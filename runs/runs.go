package runs

import (
	"context"
	"fmt"
	"sort"
	"strings"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrNoRun is FindRun's answer for a run that does not exist (yet).
type ErrNoRun struct{ ID, Namespace string }

func (e *ErrNoRun) Error() string {
	return fmt.Sprintf("no run %s in namespace %s (a pushed run ref shows up within seconds; `tau list` shows the runs there are)", e.ID, e.Namespace)
}

// FindRun finds a run by its TauRun name, its run id (the run ref's last
// element) or its full ref; the newest run of a ref wins.
func FindRun(ctx context.Context, c client.Reader, ns, id string) (*taugridv1.TauRun, error) {
	// An id that cannot be a name ("sweep/lr-0.1", "../x") is only a ref.
	if len(validation.IsDNS1123Subdomain(id)) == 0 {
		run := &taugridv1.TauRun{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: id}, run)
		if err == nil {
			return run, nil
		}
		if !apierrors.IsNotFound(err) && !apierrors.IsBadRequest(err) && !apierrors.IsInvalid(err) {
			return nil, err
		}
	}
	ref := id
	if !strings.HasPrefix(ref, "refs/") {
		ref = taugridv1.RunRefPrefix + id
	}
	var list taugridv1.TauRunList
	if err := c.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{taugridv1.LabelRefHash: RefHash(ref)}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, &ErrNoRun{ID: id, Namespace: ns}
	}
	SortNewestFirst(list.Items)
	return &list.Items[0], nil
}

// Identity is what the runs API's GET /api/v1/whoami answers: the
// namespace (the team) the request's token reads, so a CLI with only a URL
// and a token needs no -n.
type Identity struct {
	SchemaVersion int    `json:"schema_version"`
	Namespace     string `json:"namespace"`
}

// SortNewestFirst orders runs by creation time, newest first; names break
// ties so the order is stable.
func SortNewestFirst(runs []taugridv1.TauRun) {
	sort.Slice(runs, func(i, j int) bool {
		a, b := runs[i].CreationTimestamp, runs[j].CreationTimestamp
		if a.Equal(&b) {
			return runs[i].Name < runs[j].Name
		}
		return b.Before(&a)
	})
}
