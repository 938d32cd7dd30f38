package server

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/taugrid/taugrid/evidence"
)

// Audit log pages: a page holds at most maxAuditPage entries.
const (
	defaultAuditPage = 500
	maxAuditPage     = 1000
)

// audit serves a page of the token's namespace's audit log, entries as
// stored, after ?after= (a sequence number), at most ?limit= of them.
func (a *RunsAPI) audit(w http.ResponseWriter, r *http.Request, ns string) {
	if a.Audit == nil {
		apiError(w, http.StatusNotFound, "this TauGrid keeps no audit log")
		return
	}
	after, limit, ok := auditRange(w, r)
	if !ok {
		return
	}
	seqs, err := a.Audit.AuditSeqs(r.Context(), ns, after, limit+1)
	if err != nil {
		a.failed(w, r, http.StatusBadGateway, "the audit log cannot be read now; try again", err)
		return
	}
	page := evidence.AuditPage{SchemaVersion: 1, Namespace: ns, Entries: []evidence.StoredAuditEntry{}}
	if len(seqs) > limit {
		seqs, page.NextAfter = seqs[:limit], seqs[limit-1]
	}
	for _, seq := range seqs {
		raw, err := a.Audit.AuditEntry(r.Context(), ns, seq)
		if err != nil {
			a.failed(w, r, http.StatusBadGateway, "the audit log cannot be read now; try again", err)
			return
		}
		page.Entries = append(page.Entries, evidence.StoredAuditEntry{Seq: seq, Raw: string(raw)})
	}
	writeJSON(w, page)
}

// auditRange reads ?after= and ?limit=, or answers 400.
func auditRange(w http.ResponseWriter, r *http.Request) (after int64, limit int, ok bool) {
	limit = defaultAuditPage
	q := r.URL.Query()
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			apiError(w, http.StatusBadRequest, "after: want the number of the last entry you have, 0 or more")
			return 0, 0, false
		}
		after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxAuditPage {
			apiError(w, http.StatusBadRequest, fmt.Sprintf("limit: want a number of entries from 1 to %d", maxAuditPage))
			return 0, 0, false
		}
		limit = n
	}
	return after, limit, true
}
