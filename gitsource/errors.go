package gitsource

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
)

// The kinds of failure. Every error this package returns matches exactly one
// of them with errors.Is, so callers classify without parsing messages.
var (
	// ErrAuth: the server refused the credentials, or wanted some. Terminal.
	ErrAuth = errors.New("authentication failed")
	// ErrNotFound: the repository, ref, commit or file does not exist (any
	// more). Terminal.
	ErrNotFound = errors.New("not found")
	// ErrRefMoved: the ref now points somewhere other than the commit asked
	// for, and the server will not serve that commit by its id. Terminal
	// for this request; a new poll sees the new commit.
	ErrRefMoved = errors.New("ref moved")
	// ErrTooLarge: a configured limit (repository, archive, file count,
	// file size) was exceeded. Terminal.
	ErrTooLarge = errors.New("over a size limit")
	// ErrUnreachable: the host could not be reached or dropped the
	// connection. Transient.
	ErrUnreachable = errors.New("host unreachable")
	// ErrTimeout: the operation ran past its deadline. Transient.
	ErrTimeout = errors.New("timed out")
	// ErrServer: the server failed (HTTP 5xx) or throttled (HTTP 429).
	// Transient.
	ErrServer = errors.New("server error")
	// ErrTLS: the server's certificate did not verify. Terminal.
	ErrTLS = errors.New("TLS certificate not trusted")
	// ErrHostKey: the SSH host key is not in known_hosts, or differs.
	// Terminal.
	ErrHostKey = errors.New("SSH host key not trusted")
	// ErrUnsupported: a URL scheme or server feature this package does not
	// speak. Terminal.
	ErrUnsupported = errors.New("unsupported")
	// ErrCorrupt: the server sent data that is not valid git. Terminal.
	ErrCorrupt = errors.New("invalid data from server")
	// ErrCanceled: the caller canceled the context.
	ErrCanceled = errors.New("canceled")
)

// Error is a failed git operation on one repository. Its message names the
// operation, the repository (credentials removed) and the kind of failure,
// and never contains a secret.
type Error struct {
	Op     string // "list", "fetch", "read", "archive"
	URL    string // the repository, without credentials
	Kind   error  // one of the Err* kinds
	Detail string // what went wrong, secrets masked
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("git ")
	b.WriteString(e.Op)
	if e.URL != "" {
		b.WriteString(" ")
		b.WriteString(e.URL)
	}
	b.WriteString(": ")
	b.WriteString(e.Kind.Error())
	if e.Detail != "" && e.Detail != e.Kind.Error() {
		b.WriteString(": ")
		b.WriteString(e.Detail)
	}
	return b.String()
}

// Unwrap exposes the kind only: the underlying error may hold secrets.
func (e *Error) Unwrap() error { return e.Kind }

// Transient reports whether retrying err later may succeed.
func Transient(err error) bool {
	return errors.Is(err, ErrUnreachable) || errors.Is(err, ErrTimeout) || errors.Is(err, ErrServer)
}

// LimitError says which limit was exceeded; it matches ErrTooLarge.
type LimitError struct {
	Limit string // "repository size", "archive size", "file count", "file size"
	Path  string // the file, for per-file limits
	Max   int64
}

func (e *LimitError) Error() string {
	limit := strconv.FormatInt(e.Max, 10)
	if strings.HasSuffix(e.Limit, "size") {
		limit = formatBytes(e.Max)
	}
	s := e.Limit + " over the limit of " + limit
	if e.Path != "" {
		s = e.Path + ": " + s
	}
	return s
}

// Is makes a LimitError match ErrTooLarge.
func (e *LimitError) Is(target error) bool { return target == ErrTooLarge }

// redactor masks secrets in messages.
type redactor struct{ secrets []string }

func newRedactor(secrets ...string) redactor {
	var r redactor
	for _, s := range secrets {
		if len(s) >= 3 { // shorter values would mask ordinary words
			r.secrets = append(r.secrets, s)
			for _, esc := range []string{url.QueryEscape(s), url.PathEscape(s)} {
				if esc != s {
					r.secrets = append(r.secrets, esc)
				}
			}
		}
	}
	return r
}

func (r redactor) mask(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, "***")
	}
	return s
}

// wrapError turns any error from a git operation into an *Error with a kind
// and a masked message. Errors already wrapped pass through.
func wrapError(op, repoURL string, red redactor, err error) error {
	if err == nil {
		return nil
	}
	var ge *Error
	if errors.As(err, &ge) {
		return err
	}
	kind := classify(err)
	detail := red.mask(err.Error())
	var le *LimitError
	if errors.As(err, &le) {
		detail = le.Error()
	}
	return &Error{Op: op, URL: repoURL, Kind: kind, Detail: detail}
}

// classify finds the kind of a raw error from go-git, net/http, TLS or SSH.
func classify(err error) error {
	// go-git wraps transport failures in types without Unwrap.
	var ue *plumbing.UnexpectedError
	if errors.As(err, &ue) && ue.Err != nil {
		return classify(ue.Err)
	}
	var pe *plumbing.PermanentError
	if errors.As(err, &pe) && pe.Err != nil {
		return classify(pe.Err)
	}
	for _, k := range []error{ErrAuth, ErrNotFound, ErrRefMoved, ErrTooLarge, ErrUnreachable, ErrTimeout,
		ErrServer, ErrTLS, ErrHostKey, ErrUnsupported, ErrCorrupt, ErrCanceled} {
		if errors.Is(err, k) {
			return k
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return ErrCanceled
	case errors.Is(err, context.DeadlineExceeded), isNetTimeout(err):
		return ErrTimeout
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return ErrAuth
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return ErrNotFound
	case isTLSError(err):
		return ErrTLS
	}
	if k := classifyHTTP(err); k != nil {
		return k
	}
	if k := classifySSH(err.Error()); k != nil {
		return k
	}
	if isConnError(err) {
		return ErrUnreachable
	}
	return ErrCorrupt
}

func classifyHTTP(err error) error {
	var he *githttp.Err
	if !errors.As(err, &he) {
		return nil
	}
	switch code := he.StatusCode(); {
	case code == 429 || code >= 500:
		return ErrServer
	case code == 401 || code == 403:
		return ErrAuth
	case code == 404 || code == 410:
		return ErrNotFound
	default:
		return ErrUnsupported
	}
}

func classifySSH(msg string) error {
	switch {
	case strings.Contains(msg, "unable to authenticate"), strings.Contains(msg, "Permission denied"):
		return ErrAuth
	case strings.Contains(msg, "does not appear to be a git repository"),
		strings.Contains(msg, "not found"):
		return ErrNotFound
	}
	return nil
}

func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func isTLSError(err error) bool {
	var (
		ua   x509.UnknownAuthorityError
		hn   x509.HostnameError
		ci   x509.CertificateInvalidError
		cv   *tls.CertificateVerificationError
		rh   tls.RecordHeaderError
		alrt tls.AlertError
	)
	return errors.As(err, &ua) || errors.As(err, &hn) || errors.As(err, &ci) || errors.As(err, &cv) ||
		errors.As(err, &rh) || errors.As(err, &alrt) || strings.Contains(err.Error(), "x509:")
}

func isConnError(err error) bool {
	var (
		oe *net.OpError
		de *net.DNSError
	)
	return errors.As(err, &oe) || errors.As(err, &de) || errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		strings.Contains(err.Error(), "connection reset") || strings.Contains(err.Error(), "connection refused")
}

// formatBytes writes n in the largest binary unit that divides it.
func formatBytes(n int64) string {
	units := []string{"bytes", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for n >= 1024 && n%1024 == 0 && i < len(units)-1 {
		n /= 1024
		i++
	}
	return strconv.FormatInt(n, 10) + " " + units[i]
}
