package evidence

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
)

// Masked replaces every secret the masker finds.
const Masked = "****"

// minSecretLen: shorter values ("1", "true") would mask half of every log
// and protect nothing.
const minSecretLen = 4

// tokenPatterns look like credentials whatever their source: forge and
// cloud tokens, JWTs, private keys, and values after key-like words.
var tokenPatterns = []*regexp.Regexp{
	regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,})`),
	regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`),
	regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`),
	regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`),
	regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`),
	regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`),
}

// keyedSecret keeps the key and masks the value: "password=hunter22",
// "Authorization: Bearer abc...", "api_key: xyz...".
var keyedSecret = regexp.MustCompile(`(?i)\b((?:authorization|bearer|token|access[_-]?key|secret[_-]?key|secret|password|passwd|api[_-]?key)["']?\s*(?:[:=]|\s)\s*["']?)([^\s"',;]{8,})`)

// Masker hides secret values and token-looking strings in text. The zero
// value masks token patterns only.
type Masker struct {
	values []string // longest first, so a value containing another is masked whole
}

// NewMasker masks the given secret values (and their JSON-escaped forms)
// besides token patterns.
func NewMasker(values ...string) *Masker {
	m := &Masker{}
	seen := map[string]bool{}
	for _, v := range values {
		for _, form := range []string{v, strings.TrimSpace(v), jsonEscaped(v)} {
			if len(form) >= minSecretLen && !seen[form] {
				seen[form] = true
				m.values = append(m.values, form)
			}
		}
	}
	slices.SortFunc(m.values, func(a, b string) int { return len(b) - len(a) })
	return m
}

// Mask returns s with every secret replaced by Masked.
func (m *Masker) Mask(s string) string {
	if m != nil {
		for _, v := range m.values {
			s = strings.ReplaceAll(s, v, Masked)
		}
	}
	for _, re := range tokenPatterns {
		s = re.ReplaceAllString(s, Masked)
	}
	return keyedSecret.ReplaceAllString(s, "${1}"+Masked)
}

// MaskBytes is Mask for byte slices.
func (m *Masker) MaskBytes(b []byte) []byte { return []byte(m.Mask(string(b))) }

func jsonEscaped(v string) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}
