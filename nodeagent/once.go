package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Report is what one cycle found and what the agent did or would do.
type Report struct {
	Node       string      `json:"node,omitempty"`
	DryRun     bool        `json:"dryRun"`
	NVML       NVMLReport  `json:"nvml"`
	GPUs       []GPUReport `json:"gpus"`
	NodeChecks []Result    `json:"nodeChecks"`
	XIDs       []XIDEvent  `json:"xids,omitempty"`
	Faults     []Fault     `json:"faults,omitempty"`
	Verdict    Verdict     `json:"verdict"`
	Actions    syncOutcome `json:"actions"`
	// Attribution says why GPUs could not be attributed to pods ("" when they were).
	Attribution string `json:"attribution,omitempty"`
}

// NVMLReport says whether NVML worked.
type NVMLReport struct {
	Usable        bool   `json:"usable"`
	Reason        string `json:"reason,omitempty"`
	Message       string `json:"message,omitempty"`
	DriverVersion string `json:"driverVersion,omitempty"`
}

// GPUReport is one GPU's readings and check results.
type GPUReport struct {
	Index          int       `json:"index"`
	UUID           string    `json:"uuid"`
	Name           string    `json:"name,omitempty"`
	TemperatureC   *uint32   `json:"temperatureC,omitempty"`
	SlowdownC      *uint32   `json:"slowdownC,omitempty"`
	PowerW         *float64  `json:"powerW,omitempty"`
	ECCUncorrected *uint64   `json:"eccUncorrectedVolatile,omitempty"`
	RetiredPages   *int      `json:"retiredPages,omitempty"`
	RowRemap       *RowRemap `json:"rowRemap,omitempty"`
	NVLinksUp      *int      `json:"nvlinksUp,omitempty"`
	// UtilizationPct is the share of the last sample period a kernel ran.
	UtilizationPct   *uint32 `json:"utilizationPct,omitempty"`
	MemoryUsedBytes  *uint64 `json:"memoryUsedBytes,omitempty"`
	MemoryTotalBytes *uint64 `json:"memoryTotalBytes,omitempty"`
	// HeldBy is the container the kubelet allocated the GPU to (none: free,
	// or the PodResources API was not read: see Report.Attribution).
	HeldBy *Holder  `json:"heldBy,omitempty"`
	Checks []Result `json:"checks"`
}

// Once runs one cycle: it loads NVML, reads every GPU, drains the XID events
// already queued, decides, and updates the node (or, in dry-run, only says what
// it would do). The report says what it found either way; an error means the
// report could not be made at all.
func (a *Agent) Once(ctx context.Context) (*Report, error) {
	a.once = true
	defer a.stopNVML(NVMLStatus{})
	if err := a.adoptNode(ctx); err != nil && !a.cfg.DryRun {
		return nil, err
	}
	a.poll(ctx, true)
	var xids []XIDEvent
	if a.nvml.up {
		xids, a.watchErr = a.drainXIDs(ctx)
		a.obs.XIDs = xids
	}
	a.evaluate()
	a.pendingXIDs = xids
	a.sync(ctx)
	if a.kube != nil && !a.cfg.DryRun && a.last.Err != "" {
		return a.report(), errors.New(a.last.Err)
	}
	return a.report(), nil
}

// drainXIDs sets up the event set once and collects the XIDs it delivers until
// a Wait times out.
func (a *Agent) drainXIDs(ctx context.Context) ([]XIDEvent, error) {
	w := &watch{lib: a.lib, c: a.caller, clock: a.clock, wait: a.cfg.EventWait, gpus: a.probe.gpus,
		xids: a.xids, status: make(chan watchState, 1), pollNow: a.pollNow}
	done := make(chan error, 1)
	go func() { done <- w.watchOnce(ctx, true) }()
	var out []XIDEvent
	for {
		select {
		case e := <-a.xids:
			out = append(out, e)
		case err := <-done:
			for len(a.xids) > 0 {
				out = append(out, <-a.xids)
			}
			return out, err
		}
	}
}

// report assembles the last cycle's findings.
func (a *Agent) report() *Report {
	r := &Report{Node: a.cfg.NodeName, DryRun: a.cfg.DryRun || a.kube == nil, XIDs: a.obs.XIDs,
		Faults: a.state.Faults, Verdict: a.verdict, Actions: a.last}
	r.NVML = NVMLReport{Usable: a.obs.NVML.Reason == "", Reason: a.obs.NVML.Reason, Message: a.obs.NVML.Message,
		DriverVersion: a.nvml.driverVersion}
	byGPU := map[string]*GPUReport{}
	for _, s := range a.obs.GPUs {
		g := gpuReport(s)
		if h, ok := a.obs.Holders[s.UUID]; ok {
			g.HeldBy = &h
		}
		r.GPUs = append(r.GPUs, g)
	}
	switch {
	case a.obs.HoldersErr != nil:
		r.Attribution = a.obs.HoldersErr.Error()
	case a.podResources == nil:
		r.Attribution = "not attributed: no kubelet PodResources socket"
	}
	for i := range r.GPUs {
		byGPU[fmt.Sprint(r.GPUs[i].Index, r.GPUs[i].UUID)] = &r.GPUs[i]
	}
	for _, res := range a.results {
		if g, ok := byGPU[fmt.Sprint(res.GPU, res.UUID)]; ok {
			g.Checks = append(g.Checks, res)
		} else {
			r.NodeChecks = append(r.NodeChecks, res)
		}
	}
	return r
}

func gpuReport(s GPUSample) GPUReport {
	g := GPUReport{Index: s.Index, UUID: s.UUID, Name: s.Name}
	g.TemperatureC = ptrIf(s.TemperatureC)
	g.SlowdownC = ptrIf(s.SlowdownC)
	g.ECCUncorrected = ptrIf(s.ECCUncorrected)
	g.RetiredPages = ptrIf(s.RetiredPages)
	g.RowRemap = ptrIf(s.RowRemap)
	g.UtilizationPct = ptrIf(s.Utilization)
	if s.Memory.Err == nil {
		g.MemoryUsedBytes, g.MemoryTotalBytes = &s.Memory.Value.Used, &s.Memory.Value.Total
	}
	if s.PowerMilliW.Err == nil {
		w := float64(s.PowerMilliW.Value) / 1000
		g.PowerW = &w
	}
	if s.NVLinks.Err == nil {
		n := 0
		for _, l := range s.NVLinks.Value {
			if l.Up {
				n++
			}
		}
		g.NVLinksUp = &n
	}
	return g
}

func ptrIf[T any](r Reading[T]) *T {
	if r.Err != nil {
		return nil
	}
	return &r.Value
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "NVML\tusable=%v driver=%s %s\n", r.NVML.Usable, r.NVML.DriverVersion, r.NVML.Message)
	for _, g := range r.GPUs {
		fmt.Fprintf(tw, "GPU %d\t%s\t%s\t%s\n", g.Index, g.UUID, g.Name, usageText(g))
		for _, c := range g.Checks {
			fmt.Fprintf(tw, "\t%s\t%s\t%s\n", c.Check, c.Severity, c.Message)
		}
	}
	for _, c := range r.NodeChecks {
		fmt.Fprintf(tw, "node\t%s\t%s\t%s\n", c.Check, c.Severity, c.Message)
	}
	verb := "did"
	if r.DryRun {
		verb = "would do"
	}
	fmt.Fprintf(tw, "verdict\t%s %s\t%s\n", r.Verdict.Status, r.Verdict.Reason, r.Verdict.Message)
	fmt.Fprintf(tw, "actions (%s)\ttaint %s\t%s\n", verb, r.Actions.Taint, strings.TrimSpace(r.Actions.Withheld+" "+r.Actions.Err))
	return tw.Flush()
}

// usageText is a GPU's utilisation and holder in a few words.
func usageText(g GPUReport) string {
	var parts []string
	if g.UtilizationPct != nil {
		parts = append(parts, fmt.Sprintf("%d%% busy", *g.UtilizationPct))
	}
	if g.MemoryUsedBytes != nil && g.MemoryTotalBytes != nil {
		parts = append(parts, fmt.Sprintf("memory %.1f/%.1f GiB", float64(*g.MemoryUsedBytes)/(1<<30), float64(*g.MemoryTotalBytes)/(1<<30)))
	}
	if g.HeldBy != nil {
		parts = append(parts, "held by "+g.HeldBy.Namespace+"/"+g.HeldBy.Pod+"/"+g.HeldBy.Container)
	}
	return strings.Join(parts, ", ")
}
