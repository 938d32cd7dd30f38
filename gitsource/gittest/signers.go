package gittest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// SSHSigner is an ed25519 key made by ssh-keygen, as a researcher's, that
// `git tag -s` signs with (gpg.format=ssh).
type SSHSigner struct {
	KeyFile string
	// Public is the key's authorized_keys line.
	Public string
}

// NewSSHSigner makes a key in a temporary directory. Where ssh-keygen is
// not installed it skips the test, and fails it in CI (CI=true), which
// installs it.
func NewSSHSigner(t testing.TB, comment string) SSHSigner {
	t.Helper()
	requireTool(t, "ssh-keygen", "openssh-client")
	key := filepath.Join(t.TempDir(), "id_ed25519")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	return SSHSigner{KeyFile: key, Public: strings.TrimSpace(string(pub))}
}

// requireTool skips a test that needs a missing tool, or fails it in CI.
func requireTool(t testing.TB, tool, pkg string) {
	t.Helper()
	if _, err := exec.LookPath(tool); err == nil {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s is not installed; CI must install it (apt-get install %s)", tool, pkg)
	}
	t.Skipf("%s is not installed (apt-get install --no-install-recommends %s)", tool, pkg)
}

// GitArgs are the options that make git sign with the key.
func (s SSHSigner) GitArgs() []string {
	return []string{"-c", "gpg.format=ssh", "-c", "user.signingkey=" + s.KeyFile}
}

// GPGSigner is an OpenPGP key in its own GnuPG home, made by gpg.
type GPGSigner struct {
	Home        string
	Fingerprint string
	t           testing.TB
}

// NewGPGSigner makes an ed25519 signing key for uid ("Alice
// <alice@example.com>") that expires after expire (gpg's syntax: "0" for
// never, "1d"). Where gpg is not installed it skips the test, and fails
// it in CI (CI=true), which installs it.
func NewGPGSigner(t testing.TB, uid, expire string) GPGSigner {
	t.Helper()
	requireTool(t, "gpg", "gnupg")
	// A short path: gpg-agent's socket lives in the home directory.
	home, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	g := GPGSigner{Home: home, t: t}
	t.Cleanup(func() {
		_ = exec.Command("gpgconf", "--homedir", home, "--kill", "gpg-agent").Run() // no agent is fine
		_ = os.RemoveAll(home)
	})
	g.gpg("--quick-gen-key", uid, "ed25519", "sign", expire)
	for _, line := range strings.Split(g.gpg("--with-colons", "--list-keys", uid), "\n") {
		if f := strings.Split(line, ":"); f[0] == "fpr" && g.Fingerprint == "" {
			g.Fingerprint = f[9]
		}
	}
	return g
}

func (g GPGSigner) gpg(args ...string) string {
	g.t.Helper()
	args = append([]string{"--homedir", g.Home, "--batch", "--yes", "--pinentry-mode", "loopback", "--passphrase", ""}, args...)
	out, err := exec.Command("gpg", args...).Output()
	if err != nil {
		var stderr []byte
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		g.t.Fatalf("gpg %v: %v: %s", args, err, stderr)
	}
	return string(out)
}

// Public is the armored public key, as a team lists it.
func (g GPGSigner) Public() []byte {
	g.t.Helper()
	return []byte(g.gpg("--armor", "--export", g.Fingerprint))
}

// Revoke imports the revocation certificate gpg made with the key: its
// Public carries the revocation from then on.
func (g GPGSigner) Revoke() {
	g.t.Helper()
	cert, err := os.ReadFile(filepath.Join(g.Home, "openpgp-revocs.d", g.Fingerprint+".rev"))
	if err != nil {
		g.t.Fatal(err)
	}
	// gpg guards the certificate against an accidental import with a colon.
	cert = bytes.Replace(cert, []byte(":-----BEGIN PGP PUBLIC KEY BLOCK-----"), []byte("-----BEGIN PGP PUBLIC KEY BLOCK-----"), 1)
	rev := filepath.Join(g.Home, "revoke.asc")
	if err := os.WriteFile(rev, cert, 0o600); err != nil {
		g.t.Fatal(err)
	}
	g.gpg("--import", rev)
}

// Env is what git needs in its environment to find the key.
func (g GPGSigner) Env() []string { return []string{"GNUPGHOME=" + g.Home} }

// GitArgs are the options that make git sign with the key.
func (g GPGSigner) GitArgs() []string {
	return []string{"-c", "gpg.format=openpgp", "-c", "user.signingkey=" + g.Fingerprint}
}
