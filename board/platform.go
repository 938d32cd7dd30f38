package board

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	kueue "sigs.k8s.io/kueue/apis/kueue/v1beta2"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
)

// Platform is the platform team's board: every team at a glance.
type Platform struct {
	Now   time.Time
	Teams []TeamSummary
	Quota []QuotaBar
	Usage Showback // by team
	Idle  []IdleRow
}

// TeamSummary is one team's line on the platform board.
type TeamSummary struct {
	Namespace                       string
	Repositories                    int
	Waiting, Holding, Ended, Failed int
	GPUsHeld                        int32 // read by the node agents, running attempts
	WeekHours                       float64
	IdleGPUs                        int32
}

// ReadPlatform reads every team's runs and every ClusterQueue through c.
func ReadPlatform(ctx context.Context, c client.Reader, now time.Time) (*Platform, error) {
	var list taugridv1.TauRunList
	if err := c.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing runs: %w", err)
	}
	var repos taugridv1.TauRepositoryList
	if err := c.List(ctx, &repos); err != nil {
		return nil, fmt.Errorf("listing repositories: %w", err)
	}
	var cqs kueue.ClusterQueueList
	if err := c.List(ctx, &cqs); err != nil {
		return nil, fmt.Errorf("listing ClusterQueues: %w", err)
	}
	p := &Platform{Now: now, Usage: showback(list.Items, now, func(r *taugridv1.TauRun) string { return r.Namespace }), Idle: idle(list.Items)}
	teams := map[string]*TeamSummary{}
	team := func(ns string) *TeamSummary {
		if teams[ns] == nil {
			teams[ns] = &TeamSummary{Namespace: ns}
		}
		return teams[ns]
	}
	for _, r := range repos.Items {
		team(r.Namespace).Repositories++
	}
	for i := range list.Items {
		r := &list.Items[i]
		t := team(r.Namespace)
		switch phase := phaseOf(r); {
		case phase == taugridv1.PhaseQueued || phase == taugridv1.PhasePending:
			t.Waiting++
		case phase == taugridv1.PhaseFailed:
			t.Failed++
			t.Ended++
		case phase.Final():
			t.Ended++
		default:
			t.Holding++
			if a := current(r); a != nil && a.GPUUsage != nil {
				t.GPUsHeld += a.GPUUsage.GPUs
			}
		}
	}
	for _, u := range p.Usage.People {
		team(u.Person).WeekHours = u.Week
	}
	for _, row := range p.Idle {
		team(row.Namespace).IdleGPUs += row.GPUs
	}
	for _, ns := range sortedKeys(teams) {
		p.Teams = append(p.Teams, *teams[ns])
	}
	slices.SortFunc(cqs.Items, func(a, b kueue.ClusterQueue) int { return strings.Compare(a.Name, b.Name) })
	for _, cq := range cqs.Items {
		p.Quota = append(p.Quota, gpuBars(&cq)...)
	}
	return p, nil
}

// ServePlatform renders the platform board for a request already allowed
// to read it.
func (h *Handler) ServePlatform(w http.ResponseWriter, r *http.Request, session bool) {
	p, err := ReadPlatform(r.Context(), h.Client, h.Clock.Now())
	if err != nil {
		h.Log.Error(err, "reading the platform board")
		Message(w, http.StatusInternalServerError, "The board cannot read the cluster now; try again in a moment.")
		return
	}
	if err := render(w, http.StatusOK, "platform", page{Title: "platform", Refresh: RefreshSeconds, Session: session, Platform: p}); err != nil {
		h.Log.Error(err, "rendering the platform board")
	}
}
