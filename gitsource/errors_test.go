package gitsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
)

func TestErrorsAreClassifiedWhereTheyArise(t *testing.T) {
	tests := map[string]struct {
		err       error
		want      error
		transient bool
	}{
		"go-git's authentication required":        {err: transport.ErrAuthenticationRequired, want: ErrAuth},
		"go-git's authorization failed":           {err: fmt.Errorf("x: %w", transport.ErrAuthorizationFailed), want: ErrAuth},
		"go-git's repository not found":           {err: transport.ErrRepositoryNotFound, want: ErrNotFound},
		"a deadline":                              {err: context.DeadlineExceeded, want: ErrTimeout, transient: true},
		"a cancellation":                          {err: context.Canceled, want: ErrCanceled},
		"a refused connection, wrapped by go-git": {err: plumbing.NewUnexpectedError(&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}), want: ErrUnreachable, transient: true},
		"a reset connection":                      {err: fmt.Errorf("read: %w", syscall.ECONNRESET), want: ErrUnreachable, transient: true},
		"an early EOF":                            {err: io.ErrUnexpectedEOF, want: ErrUnreachable, transient: true},
		"a DNS failure":                           {err: &net.DNSError{Err: "no such host", Name: "git.example.com"}, want: ErrUnreachable, transient: true},
		"an x509 failure":                         {err: errors.New("tls: failed to verify certificate: x509: certificate signed by unknown authority"), want: ErrTLS},
		"an SSH key the server refuses":           {err: errors.New("ssh: handshake failed: ssh: unable to authenticate, attempted methods [none publickey]"), want: ErrAuth},
		"a size limit":                            {err: &LimitError{Limit: "file size", Max: 1}, want: ErrTooLarge},
		"anything else is corrupt data":           {err: errors.New("unexpected pkt-line"), want: ErrCorrupt},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := wrapError("list", "https://git.example.com/a.git", redactor{}, tc.err)
			if !errors.Is(err, tc.want) {
				t.Fatalf("%v: kind is not %v", err, tc.want)
			}
			if Transient(err) != tc.transient {
				t.Errorf("Transient = %v, want %v", !tc.transient, tc.transient)
			}
		})
	}
}

func TestErrorMessagesNeverShowSecrets(t *testing.T) {
	creds := Credentials{Password: "pa ss/word", Token: "tok_123456", SSHPassphrase: "phrase-x"}
	raw := errors.New(`Get "https://u:pa%20ss%2Fword@h/x?token=tok_123456": pa ss/word phrase-x`)
	err := wrapError("list", "https://h/x", newRedactor(creds.secrets()...), raw)
	for _, s := range []string{"pa ss/word", "pa%20ss%2Fword", "tok_123456", "phrase-x"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("%q shows %q", err, s)
		}
	}
	if !strings.Contains(err.Error(), "***") {
		t.Errorf("%q masks nothing", err)
	}
	if errors.Unwrap(err) != ErrCorrupt { //nolint:errorlint // exactly the kind, nothing deeper
		t.Errorf("Unwrap gives %v: the raw error, with its secrets, must not be reachable", errors.Unwrap(err))
	}
}

func TestSplitUserinfo(t *testing.T) {
	for in, want := range map[string][3]string{
		"https://alice:s3cret@git.example.com/a.git": {"https://git.example.com/a.git", "alice", "s3cret"},
		"https://git.example.com/a.git":              {"https://git.example.com/a.git", "", ""},
		"ssh://git@git.example.com/a.git":            {"ssh://git@git.example.com/a.git", "", ""},
		"git@git.example.com:org/a.git":              {"git@git.example.com:org/a.git", "", ""},
	} {
		clean, user, pass := splitUserinfo(in)
		if got := [3]string{clean, user, pass}; got != want {
			t.Errorf("splitUserinfo(%q) = %q, want %q", in, got, want)
		}
	}
}
