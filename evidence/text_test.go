package evidence

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestMaskHidesSecretValuesAndTokenLookingStrings(t *testing.T) {
	m := NewMasker("hunter2-hunter2", "tok", `quo"te-secret`)
	tests := map[string]struct{ in, want string }{
		"a secret value echoed":     {"HF_TOKEN is hunter2-hunter2!", "HF_TOKEN is ****!"},
		"a value too short to mask": {"tok tok", "tok tok"},
		"the JSON-escaped form":     {`{"v":"quo\"te-secret"}`, `{"v":"****"}`},
		"a GitHub token":            {"push with ghp_" + strings.Repeat("a1B2", 9), "push with ****"},
		"a Hugging Face token":      {"hf_" + strings.Repeat("x", 34) + " ok", "**** ok"},
		"an AWS key id":             {"AKIAABCDEFGHIJKLMNOP used", "**** used"},
		"a JWT":                     {"auth eyJhbGciOiJIUzI1.eyJzdWIiOiIxMjM0.c2lnbmF0dXJlcw end", "auth **** end"},
		"a password after a key":    {"password=correct-horse-battery", "password=****"},
		"a bearer header":           {"Authorization: Bearer abcdefgh12345678", "Authorization: Bearer ****"},
		"ordinary text stays":       {"epoch 3 loss 0.1234 lr=0.01", "epoch 3 loss 0.1234 lr=0.01"},
		"a private key block":       {"-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\nnext", "****\nnext"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := m.Mask(tc.in); got != tc.want {
				t.Errorf("Mask(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestMetricsLinesAreSummarisedAndGarbageIsSkippedAndCounted(t *testing.T) {
	log := strings.Join([]string{
		"starting",
		`TAU_METRIC {"step": 1, "loss": 0.9, "phase": "train"}`,
		`TAU_METRIC {"step": 2, "loss": 0.5}`,
		`TAU_METRIC not json at all`,
		`TAU_METRIC {"step": 3, "loss": 0.7`,
		`TAU_METRIC [1, 2]`,
		`2026-11-30T05:00:00Z TAU_METRIC {"step": 3, "loss": 0.2}`,
		"done",
	}, "\n")
	var m Metrics
	m.ScanMetrics([]byte(log))
	want := Metrics{Records: 3, Skipped: 3, Keys: map[string]MetricSummary{
		"step": {Count: 3, First: 1, Last: 3, Min: 1, Max: 3},
		"loss": {Count: 3, First: 0.9, Last: 0.2, Min: 0.2, Max: 0.9},
	}, Series: map[string][]Point{"loss": {{Step: 1, Value: 0.9}, {Step: 2, Value: 0.5}, {Step: 3, Value: 0.2}}}}
	if d := cmp.Diff(want, m); d != "" {
		t.Errorf("metrics (-want +got):\n%s", d)
	}
}

// endless yields n bytes of log lines without holding them.
type endless struct{ n, read int64 }

func (e *endless) Read(p []byte) (int, error) {
	if e.read >= e.n {
		return 0, io.EOF
	}
	k := min(int64(len(p)), e.n-e.read)
	for i := range p[:k] {
		p[i] = "line of a very chatty job\n"[(e.read+int64(i))%26]
	}
	e.read += k
	return int(k), nil
}

func TestATenGigabyteLogIsReadOnlyUpToTheLimitAndKeepsTheEnd(t *testing.T) {
	src := &endless{n: 10 << 30}
	tail, truncated, err := ReadTail(src, ReadLimit, KeepBytes)
	if err != nil || !truncated {
		t.Fatalf("ReadTail = %v, truncated %v", err, truncated)
	}
	if src.read > ReadLimit+64<<10 {
		t.Errorf("read %d bytes of a 10 GB log, want at most about %d", src.read, ReadLimit)
	}
	if len(tail) > KeepBytes || !strings.HasPrefix(string(tail), "line of") {
		t.Errorf("tail is %d bytes starting %q, want at most %d starting at a line", len(tail), tail[:20], KeepBytes)
	}
	short, truncated, _ := ReadTail(strings.NewReader("a\nb\n"), ReadLimit, KeepBytes)
	if string(short) != "a\nb\n" || truncated {
		t.Errorf("a short log = %q, %v", short, truncated)
	}
}

func TestKueueWaitReasonsInPlainWords(t *testing.T) {
	tests := map[string]struct{ reason, want string }{
		"quota in use": {"couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor h200, 1 more needed",
			"The quota is in use by other runs: it needs 1 more nvidia.com/gpu in flavor h200 than is free now. It starts on its own when enough of them finish."},
		"never fits": {"couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h200, request > maximum capacity (16 > 8)",
			"This run asks for 16 nvidia.com/gpu in flavor h200, more than the queue can ever give (8). It will not start on its own: lower the request in the tau file or ask the platform team for more quota."},
		"preempting":  {"Pending the preemption of 2 workload(s)", "Kueue is making room by stopping 2 lower-priority run(s); this run starts once they have stopped."},
		"no queue":    {"LocalQueue runs doesn't exist", "The LocalQueue runs doesn't exist, so nothing in it is admitted. Ask the platform team."},
		"silent":      {"", "Kueue has not said why yet; it usually does within seconds."},
		"other words": {"something new", "Kueue says: something new"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ExplainWait(tc.reason); got != tc.want {
				t.Errorf("ExplainWait = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestWebURLs(t *testing.T) {
	for in, want := range map[string]string{
		"https://user:pw@github.com/acme/research.git": "https://github.com/acme/research",
		"git@github.com:acme/research.git":             "https://github.com/acme/research",
		"ssh://git@gitea.example:2222/acme/r.git":      "https://gitea.example/acme/r",
		"file:///tmp/repo":                             "",
	} {
		if got := WebURL(in); got != want {
			t.Errorf("WebURL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := StripCredentials("https://user:pw@host/r.git"); got != "https://host/r.git" {
		t.Errorf("StripCredentials = %q", got)
	}
}
