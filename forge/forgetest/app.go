package forgetest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// App is the GitHub App the server knows.
type App struct {
	ID             int64
	InstallationID int64
	Key            *rsa.PublicKey
	// TokenLifetime is how long minted tokens last; 0: an hour.
	TokenLifetime time.Duration
	// Minted counts the installation tokens minted.
	Minted int
}

var (
	tokenPath    = regexp.MustCompile(`^/api/v3/app/installations/(\d+)/access_tokens$`)
	checkRunPath = regexp.MustCompile(`^/api/v3/repos/([^/]+)/([^/]+)/check-runs(?:/(\d+))?$`)
)

// serveApp answers the App endpoints; false: not one of them.
func (s *Server) serveApp(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.EscapedPath()
	if m := tokenPath.FindStringSubmatch(p); m != nil && r.Method == http.MethodPost {
		s.mintToken(w, r, m[1])
		return true
	}
	m := checkRunPath.FindStringSubmatch(p)
	if m == nil || (m[3] == "") != (r.Method == http.MethodPost) || (m[3] != "" && r.Method != http.MethodPatch) {
		return false
	}
	body, ok := decode(w, r)
	if !ok {
		return true
	}
	c := Call{Owner: m[1], Repo: m[2], SHA: str(body, "head_sha"), Context: str(body, "name"),
		State: str(body, "status"), Description: str(body, "output", "title"), TargetURL: str(body, "details_url")}
	if conclusion := str(body, "conclusion"); conclusion != "" {
		c.State = conclusion
	}
	c.CheckRunID, _ = strconv.ParseInt(m[3], 10, 64)
	s.reply(w, r, c)
	return true
}

func (s *Server) mintToken(w http.ResponseWriter, r *http.Request, installation string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if installation != fmt.Sprint(s.App.InstallationID) {
		writeJSON(w, http.StatusNotFound, map[string]any{"message": "Not Found"})
		return
	}
	if !s.validJWT(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")) {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"message": "A JSON web token could not be decoded"})
		return
	}
	s.App.Minted++
	life := s.App.TokenLifetime
	if life == 0 {
		life = time.Hour
	}
	writeJSON(w, http.StatusCreated, map[string]any{"token": s.Token, "expires_at": time.Now().Add(life).UTC().Format(time.RFC3339)})
}

// validJWT checks the RS256 signature and that the App issued it.
func (s *Server) validJWT(jwt string) bool {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return false
	}
	enc := base64.RawURLEncoding
	sig, err := enc.DecodeString(parts[2])
	if err != nil {
		return false
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(s.App.Key, crypto.SHA256, digest[:], sig) != nil {
		return false
	}
	raw, err := enc.DecodeString(parts[1])
	var claims struct {
		Iss string `json:"iss"`
	}
	return err == nil && json.Unmarshal(raw, &claims) == nil && claims.Iss == fmt.Sprint(s.App.ID)
}
