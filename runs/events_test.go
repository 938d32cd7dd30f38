package runs

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestEventListsAreReadInBoundedPages: a namespace of many events is read
// page by page, and no further than the pages allowed.
func TestEventListsAreReadInBoundedPages(t *testing.T) {
	integration(t)
	ns := createNamespace(t, "events-")
	ctx := context.Background()
	for i := range 25 {
		regarding := fmt.Sprintf("run-7-pod-%d", i)
		if i%5 == 0 {
			regarding = fmt.Sprintf("other-%d", i)
		}
		e := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s.%03d", regarding, i)},
			EventTime: metav1.NewMicroTime(time.Date(2026, 12, 1, 8, 0, i, 0, time.UTC)), ReportingController: "kubelet",
			ReportingInstance: "n1", Action: "Started", Reason: "Started", Type: corev1.EventTypeNormal,
			Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: regarding}}
		if err := k8s.Create(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	keep := func(e *eventsv1.Event) bool { return strings.HasPrefix(e.Regarding.Name, "run-7") }
	got, complete, err := listEvents(ctx, k8s, ns, 10, 2, keep)
	if err != nil || complete || len(got) > 20 {
		t.Errorf("two pages of 10: %d events, complete %v (%v); want at most 20 read, incomplete", len(got), complete, err)
	}
	got, complete, err = listEvents(ctx, k8s, ns, 10, 3, keep)
	if err != nil || !complete || len(got) != 20 {
		t.Errorf("three pages of 10: %d events, complete %v (%v); want the 20 about run-7, complete", len(got), complete, err)
	}
}
