package evidence

import (
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// Masked replaces every secret the masker finds.
const Masked = "****"

// minSecretLen: shorter values ("1", "true") would mask half of every log
// and protect nothing.
const minSecretLen = 4

// Encoded forms are masked only for values of at least minEncodedLen bytes,
// and only where the form is at least minFormLen characters: a 4-character
// base64 fragment occurs in ordinary text by chance.
const (
	minEncodedLen = 6
	minFormLen    = 8
)

// minLineLen is the shortest line of a multi-line secret (a PEM body, a
// JSON key file) masked on its own: a PEM body line is 64 characters, its
// last line may be short, and "}" is no secret.
const minLineLen = 16

// tokenPatterns look like credentials whatever their source: forge and
// cloud tokens, JWTs, private keys. Each runs only on text holding one of
// its hints: a regular expression costs far more than a substring search,
// and most log lines hold no token at all.
var tokenPatterns = []tokenPattern{
	{regexp.MustCompile(`\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}|glpat-[A-Za-z0-9_-]{20,}|hf_[A-Za-z0-9]{30,})`), []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "hf_"}},
	{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), []string{"AKIA", "ASIA"}},
	{regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`), []string{"xox"}},
	{regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{20,}`), []string{"sk-"}},
	{regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}`), []string{"eyJ"}},
}

type tokenPattern struct {
	re    *regexp.Regexp
	hints []string
}

func (p tokenPattern) mask(s string) string {
	for _, h := range p.hints {
		if strings.Contains(s, h) {
			return p.re.ReplaceAllString(s, Masked)
		}
	}
	return s
}

// privateKeyBlock is a PEM private key, to its END line or the end of the
// text.
var privateKeyBlock = regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)`)

// secretWordEnds end every key keyedSecret matches, lower-cased.
var secretWordEnds = []string{"authorization", "bearer", "token", "key", "secret", "password", "passwd", "pwd", "credential", "credentials"}

// mayHoldKeyedSecret: a secret word followed by what may separate it from
// a value. Most lines fail it ("tokens/s", "keyboard"), and skip the
// regular expression.
func mayHoldKeyedSecret(s string) bool {
	lower := strings.ToLower(s)
	for _, w := range secretWordEnds {
		for i := 0; ; {
			j := strings.Index(lower[i:], w)
			if j < 0 {
				break
			}
			if k := i + j + len(w); k < len(lower) && strings.IndexByte("\"' \t:=", lower[k]) >= 0 {
				return true
			}
			i += j + 1
		}
	}
	return false
}

// secretWords end the names of variables and keys that hold credentials:
// WANDB_API_KEY, HF_TOKEN, DB_PASSWORD, client-secret, Authorization.
const secretWords = `authorization|bearer|token|access[_-]?key|secret[_-]?key|private[_-]?key|secret|password|passwd|pwd|api[_-]?key|credentials?`

// keyedSecret keeps the key and masks the value: "password=hunter22",
// "Authorization: Bearer abc...", "api_key: xyz...", "WANDB_API_KEY=...",
// `"client_secret": "..."`.
var keyedSecret = regexp.MustCompile(`(?i)((?:^|[^a-z0-9])(?:` + secretWords + `)["']?\s*(?:[:=]|\s)\s*["']?)([^\s"',;]{8,})`)

var secretEnvName = regexp.MustCompile(`(?i)(?:^|[_.-])(?:` + secretWords + `)$`)

// SecretEnvName reports whether an environment variable's name says it
// holds a credential (WANDB_API_KEY, HF_TOKEN, DB_PASSWORD, AWS_SECRET_ACCESS_KEY),
// so a literal value given to it is masked like a Secret's.
func SecretEnvName(name string) bool { return secretEnvName.MatchString(name) }

// Masker hides secret values, their encodings and token-looking strings in
// text. The zero value masks token patterns only.
type Masker struct {
	forms    []string // longest first, so a value containing another is masked whole
	replacer *strings.Replacer
	maxLen   int // of any form: what a stream holds back
}

// NewMasker masks the given secret values besides token patterns, in every
// form a program is likely to print them: as is, trimmed, JSON-escaped,
// base64 (standard and URL alphabets, padded or not, and embedded at any
// of the three byte alignments in a longer base64 stream), hex (lower and
// upper case), URL-escaped, and each line of a multi-line value.
func NewMasker(values ...string) *Masker {
	m := &Masker{}
	seen := map[string]bool{}
	for _, v := range values {
		for _, form := range secretForms(v) {
			if len(form) >= minSecretLen && !seen[form] {
				seen[form] = true
				m.forms = append(m.forms, form)
			}
		}
	}
	slices.SortFunc(m.forms, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(m.forms))
	for _, f := range m.forms {
		pairs = append(pairs, f, Masked)
		m.maxLen = max(m.maxLen, len(f))
	}
	m.replacer = strings.NewReplacer(pairs...)
	return m
}

// secretForms are the strings that give a secret value away.
func secretForms(v string) []string {
	var forms []string
	for _, s := range []string{v, strings.TrimSpace(v)} {
		forms = append(forms, s, jsonEscaped(s))
		if len(s) >= minEncodedLen {
			forms = append(forms, encodedForms([]byte(s))...)
		}
	}
	if strings.ContainsAny(v, "\r\n") {
		for line := range strings.FieldsFuncSeq(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
			if line = strings.TrimSpace(line); len(line) >= minLineLen {
				forms = append(forms, line)
			}
		}
	}
	return slices.DeleteFunc(forms, func(f string) bool { return len(f) < minSecretLen })
}

// encodedForms are b in base64, hex and URL escaping. Base64 forms that
// only encoders see (a value in the middle of a longer encoded stream) are
// the characters whose six bits all come from b, at each of the three
// offsets b may start at.
func encodedForms(b []byte) []string {
	var forms []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		forms = append(forms, enc.EncodeToString(b), enc.WithPadding(base64.NoPadding).EncodeToString(b))
		for k := range 3 {
			padded := append(make([]byte, k), b...)
			s := enc.WithPadding(base64.NoPadding).EncodeToString(padded)
			from, to := (8*k+5)/6, 8*(k+len(b))/6
			if to-from >= minFormLen {
				forms = append(forms, s[from:to])
			}
		}
	}
	h := hex.EncodeToString(b)
	forms = append(forms, h, strings.ToUpper(h), url.QueryEscape(string(b)), url.PathEscape(string(b)))
	return slices.DeleteFunc(forms, func(f string) bool { return len(f) < minFormLen })
}

// Mask returns s with every secret replaced by Masked.
func (m *Masker) Mask(s string) string {
	if m != nil && m.replacer != nil {
		s = m.replacer.Replace(s)
	}
	for _, p := range tokenPatterns {
		s = p.mask(s)
	}
	if strings.Contains(s, "-----BEGIN ") {
		s = privateKeyBlock.ReplaceAllString(s, Masked)
	}
	if mayHoldKeyedSecret(s) {
		s = keyedSecret.ReplaceAllString(s, "${1}"+Masked)
	}
	return s
}

// MaskBytes is Mask for byte slices.
func (m *Masker) MaskBytes(b []byte) []byte { return []byte(m.Mask(string(b))) }

func jsonEscaped(v string) string {
	b, _ := json.Marshal(v)
	return strings.Trim(string(b), `"`)
}
