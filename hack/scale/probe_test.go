package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTheProbeCountsEachWriteOnce(t *testing.T) {
	var p probe
	p.sent = map[int]time.Time{}
	at := time.Unix(1000, 0)
	p.sent[1], p.sent[2] = at, at.Add(time.Second)
	p.saw(1, at.Add(300*time.Millisecond))
	p.saw(1, at.Add(5*time.Second)) // the same write seen again (a re-opened watch) is not a second sample
	p.saw(7, at)                    // a write this probe did not time
	p.written = []time.Duration{100 * time.Millisecond}
	written, seen := p.take()
	if written[1] != 100*time.Millisecond || seen != [2]time.Duration{300 * time.Millisecond, 300 * time.Millisecond} {
		t.Errorf("written %v, seen %v; want 100ms and one 300ms sample", written, seen)
	}
	if _, seen := p.take(); seen[0] != -1 {
		t.Errorf("a second take saw %v, want nothing (the first one forgets)", seen)
	}
}

func TestAWatchCountsItsLateEventsAndRestartsOncePerReport(t *testing.T) {
	written := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	pod := func() *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{
			{Time: &metav1.Time{Time: written.Add(-time.Hour)}}, {Time: &metav1.Time{Time: written}}}}}
	}
	var s watchStats
	s.count("pods", func(c *watchCount) { c.saw(pod(), written.Add(2*time.Second)) })  // on time: the last write counts, not the first
	s.count("pods", func(c *watchCount) { c.saw(pod(), written.Add(90*time.Second)) }) // 90 s behind
	s.count("pods", func(c *watchCount) { c.ended++ })
	want := "pods 2 events (1 over 5s after their write, the latest 1m30s), ended by the server 1, too old to resume 0, failed to open 0"
	if got := s.take(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got := s.take(); got != "" {
		t.Errorf("a second report says %q, want nothing (the first one forgets)", got)
	}
}
