package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"syscall"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	"github.com/taugrid/taugrid/runs"
)

// The headers of a JSON delivery.
const (
	// HeaderSignature is "sha256=<hex>": HMAC-SHA256 of the body with the
	// target's hmacKey, as GitHub signs its webhooks.
	HeaderSignature = "X-Tau-Signature-256"
	// HeaderDelivery is the same for every try of one notification: a
	// receiver that saw it already can drop it.
	HeaderDelivery = "X-Tau-Delivery"
	HeaderEvent    = "X-Tau-Event"
)

// Payload is a JSON delivery's body. It carries what the run's commit
// status shows, never a credential.
type Payload struct {
	SchemaVersion int                         `json:"schema_version"`
	Event         taugridv1.NotificationEvent `json:"event"`
	Time          time.Time                   `json:"time"`
	Text          string                      `json:"text"`
	Run           RunSummary                  `json:"run"`
}

// RunSummary is the run a delivery is about.
type RunSummary struct {
	Namespace   string             `json:"namespace"`
	Name        string             `json:"name"`
	ID          string             `json:"id"`
	Repository  string             `json:"repository"`
	Commit      string             `json:"commit"`
	Ref         string             `json:"ref"`
	Target      string             `json:"target"`
	Requester   string             `json:"requester,omitempty"`
	Phase       taugridv1.RunPhase `json:"phase"`
	Message     string             `json:"message,omitempty"`
	EvidenceURL string             `json:"evidence_url,omitempty"`
}

// Message is the notification of event about run.
func Message(run *taugridv1.TauRun, event taugridv1.NotificationEvent, now time.Time) Payload {
	id := runs.ID(run)
	what := map[taugridv1.NotificationEvent]string{
		taugridv1.NotifyEnded:     "ended: " + strings.ToLower(string(run.Status.Phase)),
		taugridv1.NotifyFailed:    "failed",
		taugridv1.NotifyPreempted: "was preempted",
		taugridv1.NotifyWaiting:   "has been waiting in its queue since " + entered(run).UTC().Format("15:04 UTC"),
		taugridv1.NotifyIdle:      "has idle GPUs",
	}[event]
	text := fmt.Sprintf("Run %s of %s/%s %s", id, run.Namespace, run.Spec.Repository, what)
	if run.Status.Message != "" {
		text += ": " + run.Status.Message
	}
	return Payload{SchemaVersion: 1, Event: event, Time: now.UTC(), Text: text, Run: RunSummary{
		Namespace: run.Namespace, Name: run.Name, ID: id, Repository: run.Spec.Repository, Commit: run.Spec.Commit,
		Ref: run.Spec.Trigger.Ref, Target: run.Spec.Target, Requester: run.Spec.Trigger.Requester, Phase: run.Status.Phase,
		Message: run.Status.Message, EvidenceURL: run.Status.EvidenceURL}}
}

// DeliveryID names one notification of one run, whatever the try.
func DeliveryID(run *taugridv1.TauRun, key string) string {
	h := sha256.Sum256([]byte(string(run.UID) + "/" + key))
	return hex.EncodeToString(h[:16])
}

// Sign is the HeaderSignature value of body under key.
func Sign(key, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// Sender posts deliveries. By default it refuses a URL whose host resolves
// to a loopback, private, link-local or unspecified address: a target's
// URL is the tenant's to choose, and the controller must not become its
// way into the cluster's network (the API server, another tenant's pods,
// a cloud's metadata service). It checks the address it dials, after DNS,
// so a name that resolves differently later is checked too.
type Sender struct {
	// AllowPrivate lets targets on private networks through (an in-house
	// chat server); the platform decides (--notify-allow-private-networks).
	AllowPrivate bool
	// Timeout bounds one try; 0: 10 s.
	Timeout time.Duration

	client *http.Client
}

func (s *Sender) httpClient() *http.Client {
	if s.client == nil {
		dialer := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			if ip := net.ParseIP(host); ip != nil && !s.AllowPrivate && private(ip) {
				return permanent(fmt.Errorf("the target's address %s is on a private network, which this controller does not post to", ip))
			}
			return nil
		}}
		t := &http.Transport{DialContext: dialer.DialContext, ForceAttemptHTTP2: true, TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConnsPerHost: 2, IdleConnTimeout: 90 * time.Second}
		timeout := s.Timeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		s.client = &http.Client{Transport: t, Timeout: timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return s.client
}

func private(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsUnspecified() || ip.IsMulticast() || ip.IsInterfaceLocalMulticast()
}

// Send posts msg to target in format: TauGrid's JSON signed with key, or a
// Slack incoming webhook's message. Its errors never name the URL.
func (s *Sender) Send(ctx context.Context, target string, key []byte, format, id string, msg Payload) error {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" || (u.Scheme != "https" && (u.Scheme != "http" || !s.AllowPrivate)) {
		return permanent(errors.New("the target's url is not an https:// URL"))
	}
	var body []byte
	if format == taugridv1.NotifyFormatSlack {
		text := msg.Text
		if msg.Run.EvidenceURL != "" {
			text += " <" + msg.Run.EvidenceURL + "|evidence>"
		}
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false) // Slack's links are <url|text>
		err = enc.Encode(map[string]string{"text": text})
		body = bytes.TrimSpace(b.Bytes())
	} else {
		body, err = json.Marshal(msg)
	}
	if err != nil {
		return permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return permanent(errors.New("the target's url is not a URL"))
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "TauGrid-Notify/1")
	req.Header.Set(HeaderDelivery, id)
	req.Header.Set(HeaderEvent, string(msg.Event))
	if format != taugridv1.NotifyFormatSlack {
		req.Header.Set(HeaderSignature, Sign(key, body))
	}
	resp, err := s.httpClient().Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) { // its text holds the URL: a credential
			err = ue.Err
		}
		var p *permanentError
		if errors.As(err, &p) {
			return p
		}
		return fmt.Errorf("posting failed: %w", err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500:
		return fmt.Errorf("the target answered %s", resp.Status)
	}
	return permanent(fmt.Errorf("the target answered %s", resp.Status))
}

// permanentError is a failure another try would repeat: a missing Secret,
// a refused address, a 4xx.
type permanentError struct{ err error }

func (p *permanentError) Error() string { return p.err.Error() }
func (p *permanentError) Unwrap() error { return p.err }

func permanent(err error) error { return &permanentError{err} }

func retryable(err error) bool {
	var p *permanentError
	return !errors.As(err, &p)
}
