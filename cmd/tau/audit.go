package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/evidence"
)

type auditOptions struct {
	statusOptions
	JSON   bool
	Verify bool
}

func newAuditCmd() *cobra.Command {
	o := &auditOptions{}
	cmd := &cobra.Command{
		Use:   "audit [run-id]",
		Short: "Show who decided what about a run, from your team's tamper-evident audit log",
		Long: `tau audit prints a run's decisions in the order they were made: who requested it, who signed
its ref, the policy commit and digests it was rendered from, Kueue's admission and admission
checks, preemptions, retries, cancellation and the outcome. Without a run, the whole log.

Every entry is chained to the one before by its sha256, and tau checks the whole chain of your
team's log each time: an entry removed, changed or moved is reported with its number.`,
		Example: `  tau audit r-20261130-101500-3f9a2c
  tau audit --json > team-a-audit.jsonl       # export the whole log, one entry a line
  tau audit --verify                          # exit 2 if the log was tampered with`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runAudit(cmd, o, args) },
	}
	sourceFlags(cmd, &o.statusOptions)
	cmd.Flags().BoolVar(&o.JSON, "json", false, "print the entries as JSON lines, exactly as stored (for export)")
	cmd.Flags().BoolVar(&o.Verify, "verify", false, "exit non-zero when the log's chain is broken")
	return cmd
}

func runAudit(cmd *cobra.Command, o *auditOptions, args []string) error {
	src, err := openSource(&o.statusOptions)
	if err != nil {
		return err
	}
	api, ok := src.(*apiSource)
	if !ok {
		return usageError{errors.New("tau audit reads the TauGrid API, which keeps the audit log: run tau login --api-url <your TauGrid API> (or set TAU_API_URL and TAU_TOKEN)")}
	}
	ctx := contextOf(cmd)
	chain, err := api.AuditLog(ctx)
	if err != nil {
		return err
	}
	run := ""
	if len(args) == 1 {
		if run, err = auditRunName(ctx, api, args[0]); err != nil {
			return err
		}
	}
	breaks := evidence.VerifyAuditChain(chain)
	if o.JSON {
		err = printAuditJSON(cmd.OutOrStdout(), chain, run)
	} else {
		err = printAudit(cmd.OutOrStdout(), api.Namespace(), chain, run)
	}
	if err != nil {
		return err
	}
	return reportChain(cmd.ErrOrStderr(), api.Namespace(), len(chain), breaks, o.Verify)
}

// auditRunName is the run's name for a run ID or name; a run that is
// gone is looked for in the log under the name given.
func auditRunName(ctx context.Context, api *apiSource, id string) (string, error) {
	run, err := api.Get(ctx, id)
	var nf notFoundError
	switch {
	case errors.As(err, &nf):
		return id, nil
	case err != nil:
		return "", err
	}
	return run.Name, nil
}

// AuditLog reads the whole of the team's audit log, page by page.
func (a *apiSource) AuditLog(ctx context.Context) ([]evidence.StoredAuditEntry, error) {
	var all []evidence.StoredAuditEntry
	after := int64(0)
	for {
		var page evidence.AuditPage
		q := url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {"1000"}}
		if err := a.getJSON(ctx, "/audit?"+q.Encode(), &page); err != nil {
			return nil, err
		}
		all = append(all, page.Entries...)
		if page.NextAfter <= after { // the last page (or a server that does not page)
			return all, nil
		}
		after = page.NextAfter
	}
}

// printAudit writes the run's entries (all, for run ""), one a line: when,
// what, by whom, why.
func printAudit(w io.Writer, ns string, chain []evidence.StoredAuditEntry, run string) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tWHEN (UTC)\tRUN\tDECISION\tBY\tWHY")
	n := 0
	for _, st := range chain {
		var e evidence.AuditEntry
		if json.Unmarshal([]byte(st.Raw), &e) != nil || (run != "" && e.Run != run) {
			continue
		}
		n++
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", st.Seq, e.At.UTC().Format(time.DateTime), e.Run, e.Decision, dash(e.By), e.Message)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if n == 0 && run != "" {
		fmt.Fprintf(w, "The audit log of %s holds no decision about run %s yet.\n", ns, run)
	}
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// printAuditJSON writes the entries as stored, one a line.
func printAuditJSON(w io.Writer, chain []evidence.StoredAuditEntry, run string) error {
	for _, st := range chain {
		var e evidence.AuditEntry
		if run != "" && (json.Unmarshal([]byte(st.Raw), &e) != nil || e.Run != run) {
			continue
		}
		var line bytes.Buffer
		if json.Compact(&line, []byte(st.Raw)) != nil {
			line.Reset()
			b, _ := json.Marshal(st) // not JSON any more: exported as it is, with its number
			line.Write(b)
		}
		line.WriteByte('\n')
		if _, err := w.Write(line.Bytes()); err != nil {
			return err
		}
	}
	return nil
}

// reportChain says on stderr whether the team's log holds together; with
// verify, a broken one is an error.
func reportChain(w io.Writer, ns string, entries int, breaks []evidence.ChainBreak, verify bool) error {
	if len(breaks) == 0 {
		if verify {
			fmt.Fprintf(w, "The audit log of %s holds together: %d entries, each chained to the one before.\n", ns, entries)
		}
		return nil
	}
	fmt.Fprintf(w, "\nThe audit log of %s is BROKEN: it was changed after it was written.\n", ns)
	for _, b := range breaks {
		fmt.Fprintf(w, "  %s\n", b.Message)
	}
	fmt.Fprintln(w, "Ask your platform team to compare the evidence store with its backups.")
	if verify {
		return reportedError{errors.New("the audit log is broken")}
	}
	return nil
}
