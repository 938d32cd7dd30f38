package forge

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// restPoster posts commit statuses to Gitea/Forgejo and GitLab, whose
// status APIs are one small POST each.
type restPoster struct {
	c Config
}

// Post creates a commit status.
func (p *restPoster) Post(ctx context.Context, s Status) (Posted, error) {
	endpoint, body, err := p.request(s)
	if err != nil {
		return Posted{}, err
	}
	var out struct {
		ID int64 `json:"id"`
	}
	err = p.do(ctx, http.MethodPost, endpoint, body, &out)
	p.c.Metrics.observe(p.c.Type, err)
	if err != nil {
		return Posted{}, err
	}
	return Posted{ID: out.ID}, nil
}

// request builds the endpoint and body in the forge's vocabulary.
func (p *restPoster) request(s Status) (string, map[string]string, error) {
	base := strings.TrimSuffix(p.c.APIURL, "/")
	desc := Shorten(s.Description, MaxDescription)
	sha := url.PathEscape(s.SHA)
	if p.c.Type == GitLab {
		base = strings.TrimSuffix(base, "/api/v4")
		project := url.PathEscape(s.Owner + "/" + s.Repo)
		return fmt.Sprintf("%s/api/v4/projects/%s/statuses/%s", base, project, sha),
			map[string]string{"state": gitLabState(s.State), "name": s.Context, "description": desc, "target_url": s.TargetURL}, nil
	}
	base = strings.TrimSuffix(base, "/api/v1")
	state := string(s.State)
	if s.State == StateRunning {
		state = string(StatePending)
	}
	return fmt.Sprintf("%s/api/v1/repos/%s/%s/statuses/%s", base, url.PathEscape(s.Owner), url.PathEscape(s.Repo), sha),
		map[string]string{"state": state, "context": s.Context, "description": desc, "target_url": s.TargetURL}, nil
}

// gitLabState maps a state to GitLab's pending/running/success/failed/
// canceled. TauGrid's error state is a cancelled run.
func gitLabState(s State) string {
	switch s {
	case StateFailure:
		return "failed"
	case StateError:
		return "canceled"
	}
	return string(s)
}

// do sends one request; a nil body sends none.
func (p *restPoster) do(ctx context.Context, method, endpoint string, body any, out any) error {
	var data io.Reader = http.NoBody
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		data = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, endpoint, data)
	if err != nil {
		return &ConfigError{Msg: "invalid API URL"}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if p.c.Type == GitLab {
		req.Header.Set("PRIVATE-TOKEN", p.c.Token)
	} else {
		req.Header.Set("Authorization", "token "+p.c.Token)
	}
	resp, err := p.c.HTTPClient.Do(req)
	if err != nil {
		return transportError(p.c.Type, err)
	}
	defer resp.Body.Close()
	p.c.Metrics.quota(p.c.Type, resp.Header)
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		_ = json.Unmarshal(raw, out) // the ID is a nicety
		return nil
	}
	if d, ok := rateLimitWait(resp, p.c.Clock); ok {
		return &WaitError{Forge: p.c.Type, After: d}
	}
	return &APIError{Forge: p.c.Type, StatusCode: resp.StatusCode, Message: apiMessage(raw)}
}

// apiMessage picks the forge's message out of an error body.
func apiMessage(raw []byte) string {
	var m struct {
		Message any    `json:"message"`
		Error   string `json:"error"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return ""
	}
	if m.Message != nil {
		return Shorten(fmt.Sprint(m.Message), 200)
	}
	return Shorten(m.Error, 200)
}

// transportError reports a failed round trip without the URL, which
// url.Error would repeat.
func transportError(f Type, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%s: request timed out", f)
	}
	return fmt.Errorf("%s: %w", f, err)
}
