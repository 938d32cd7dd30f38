package forge

import (
	"context"

	"github.com/google/go-github/v62/github"
)

// checkRuns reports a run as one GitHub check run, created on the first
// post and updated after; it needs a GitHub App's installation token.
type checkRuns struct {
	*gitHub
}

// Post creates the check run (s.CheckRunID 0) or updates it. Posted.ID is
// the check run's ID, for the next update.
func (g checkRuns) Post(ctx context.Context, s Status) (Posted, error) {
	status, conclusion := checkRunState(s.State)
	title := Shorten(s.Description, MaxDescription)
	summary := s.Summary
	if summary == "" {
		summary = s.Description
	}
	output := &github.CheckRunOutput{Title: &title, Summary: github.String(summary)}
	var details *string
	if s.TargetURL != "" {
		details = &s.TargetURL
	}
	var cr *github.CheckRun
	var resp *github.Response
	var err error
	if s.CheckRunID == 0 {
		cr, resp, err = g.client.Checks.CreateCheckRun(ctx, s.Owner, s.Repo, github.CreateCheckRunOptions{
			Name: s.Context, HeadSHA: s.SHA, DetailsURL: details, ExternalID: &s.Context,
			Status: &status, Conclusion: conclusion, Output: output})
	} else {
		cr, resp, err = g.client.Checks.UpdateCheckRun(ctx, s.Owner, s.Repo, s.CheckRunID, github.UpdateCheckRunOptions{
			Name: s.Context, DetailsURL: details, ExternalID: &s.Context,
			Status: &status, Conclusion: conclusion, Output: output})
	}
	err = g.classify(resp, err)
	g.c.Metrics.observe(GitHub, err)
	if err != nil {
		return Posted{}, err
	}
	return Posted{ID: cr.GetID()}, nil
}

// checkRunState maps a state to a check run's status and conclusion.
func checkRunState(s State) (string, *string) {
	switch s {
	case StatePending:
		return "queued", nil
	case StateRunning:
		return "in_progress", nil
	case StateSuccess:
		return "completed", github.String("success")
	case StateFailure:
		return "completed", github.String("failure")
	}
	return "completed", github.String("cancelled")
}
