package impact

import (
	"fmt"
	"strings"
)

// empty reports a tenant the change does not touch.
func (t *TenantImpact) empty() bool {
	return len(t.Quotas) == 0 && len(t.Removals) == 0 && len(t.Moves) == 0 && len(t.Runs) == 0
}

// count counts the runs of an outcome.
func (p *Preview) count(o Outcome) (n int, tenants []string) {
	for _, t := range p.Tenants {
		k := 0
		for _, r := range t.Runs {
			if r.Outcome == o {
				k++
			}
		}
		if k > 0 {
			n += k
			tenants = append(tenants, fmt.Sprintf("%s %d", t.Tenant, k))
		}
	}
	return n, tenants
}

// summary is the preview in one line of at most MaxSummary characters,
// the most serious first.
func summary(p *Preview) string {
	var parts []string
	if n, ts := p.count(NeverStarts); n > 0 {
		s := fmt.Sprintf("strands %s (%s)", plural(n, "queued run"), strings.Join(ts, ", "))
		if p.Accepted {
			s = "accepted: " + s
		}
		parts = append(parts, s)
	}
	if n, _ := p.count(RefusedOnRetry); n > 0 {
		parts = append(parts, plural(n, "running run")+" refused on retry")
	}
	if n, _ := p.count(StartsAsSubmitted); n > 0 {
		parts = append(parts, plural(n, "queued run")+" refused on retry")
	}
	queues, removals, moves := 0, len(p.Platform), 0
	for _, t := range p.Tenants {
		queues += len(t.Quotas)
		removals += len(t.Removals)
		moves += len(t.Moves)
	}
	queues += len(p.OtherQuotas)
	if queues > 0 {
		parts = append(parts, plural(queues, "quota")+" changed")
	}
	if removals > 0 {
		parts = append(parts, plural(removals, "removal"))
	}
	switch {
	case moves == 1:
		parts = append(parts, "1 repository changes queue")
	case moves > 1:
		parts = append(parts, plural(moves, "repository")+" change queue")
	}
	if n := len(p.UncoveredNodes); n > 0 {
		parts = append(parts, plural(n, "node")+" no flavor covers")
	}
	if n := len(p.UnservedFlavors); n > 0 {
		parts = append(parts, plural(n, "flavor")+" no node serves")
	}
	if len(parts) == 0 {
		return "No effect on tenants' quotas, runs or nodes"
	}
	s := strings.Join(parts, "; ")
	s = strings.ToUpper(s[:1]) + s[1:]
	return clip(s, MaxSummary)
}

// clip cuts s to at most n characters at a "; ", ending it with "…".
func clip(s string, n int) string {
	if len([]rune(s)) <= n {
		return s
	}
	r := []rune(s)[:n-1]
	if i := strings.LastIndex(string(r), "; "); i > 0 {
		return string(r)[:i] + "…"
	}
	return string(r) + "…"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	if strings.HasSuffix(what, "y") {
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// body is the preview in Markdown, which reads as plain text too.
func body(p *Preview, old, new *Policy) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Platform change: %s → %s\n\n%s\n", name(old), name(new), p.Summary)
	switch {
	case p.Stranded && p.Accepted:
		b.WriteString("\nThe queued runs below that would never start are stranded by this change; it was accepted.\n")
	case p.Stranded:
		b.WriteString("\n**Failing:** queued runs below would never start under the new policy. Change the policy, or accept stranding them.\n")
	}
	var quiet []string
	for i := range p.Tenants {
		t := &p.Tenants[i]
		if t.empty() {
			quiet = append(quiet, fmt.Sprintf("%s (%s)", t.Tenant, plural(t.Unchanged, "run")))
			continue
		}
		writeTenant(&b, t)
	}
	if len(p.Platform) > 0 {
		b.WriteString("\n### Every tenant\n\n")
		writeRemovals(&b, p.Platform)
	}
	if len(p.OtherQuotas) > 0 {
		b.WriteString("\n### ClusterQueues no tenant submits to\n\n")
		writeQuotas(&b, p.OtherQuotas)
	}
	if len(p.UncoveredNodes) > 0 {
		fmt.Fprintf(&b, "\n### Nodes no flavor covers any more\n\nKueue gives no quota of these: %s\n", strings.Join(p.UncoveredNodes, ", "))
	}
	if len(p.UnservedFlavors) > 0 {
		fmt.Fprintf(&b, "\n### Flavors no node serves\n\nNo node carries the labels of %s: quota of them admits pods no node can take.\n", strings.Join(p.UnservedFlavors, ", "))
	}
	if len(quiet) > 0 {
		fmt.Fprintf(&b, "\nUnchanged: %s.\n", strings.Join(quiet, ", "))
	}
	return b.String()
}

func name(p *Policy) string {
	if p.Commit == "" {
		return "the policy"
	}
	return p.Commit
}

func writeTenant(b *strings.Builder, t *TenantImpact) {
	fmt.Fprintf(b, "\n### %s\n", t.Tenant)
	if len(t.Quotas) > 0 {
		b.WriteString("\nQuota:\n\n")
		writeQuotas(b, t.Quotas)
	}
	if len(t.Removals) > 0 {
		b.WriteString("\nRemoved or narrowed:\n\n")
		writeRemovals(b, t.Removals)
	}
	if len(t.Runs) > 0 {
		b.WriteString("\nRuns:\n\n")
		for _, r := range t.Runs {
			fmt.Fprintf(b, "- %s (%s, %s): %s: %s\n", r.Name, r.Repository, strings.ToLower(string(r.Phase)), outcomeText(r.Outcome), strings.Join(r.Why, "; "))
		}
	}
	if len(t.Moves) > 0 {
		b.WriteString("\nRepositories whose runs change queue:\n\n")
		for _, m := range t.Moves {
			fmt.Fprintf(b, "- %s: %s, was %s\n", m.Repository, m.After, m.Before)
		}
	}
	if t.Unchanged > 0 {
		fmt.Fprintf(b, "\n%s not affected.\n", plural(t.Unchanged, "other run"))
	}
}

// outcomeText says an outcome as the reader needs it.
func outcomeText(o Outcome) string {
	switch o {
	case RefusedOnRetry:
		return "keeps running; " + string(o)
	case StartsAsSubmitted:
		return "starts as submitted; would be refused on retry"
	}
	return string(o)
}

func writeQuotas(b *strings.Builder, qs []QuotaChange) {
	b.WriteString("| ClusterQueue | flavor | resource | before | after | in use now |\n|---|---|---|---|---|---|\n")
	for _, q := range qs {
		after := orDash(q.After)
		if q.Below {
			after += " (under what is in use)"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", q.ClusterQueue, q.Flavor, q.Resource, orDash(q.Before), after, orDash(q.InUse))
	}
}

func writeRemovals(b *strings.Builder, rs []Removal) {
	for _, r := range rs {
		fmt.Fprintf(b, "- %s %s: %s\n", r.Kind, r.Name, r.Detail)
	}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
