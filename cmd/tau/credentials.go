package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// credentials is what tau login stores: one TauGrid API token per origin,
// in the user's config directory, never in a repository.
type credentials struct {
	APIs []login `yaml:"apis"`
}

// login is one API's token, as tau login checked and stored it.
type login struct {
	APIURL string `yaml:"api_url"`
	Token  string `yaml:"token"`
}

const credentialsHeader = "# Written by tau login: one TauGrid API token per origin.\n" +
	"# Keep this file private (chmod 600); tau refuses it when others can read it.\n"

// find is the login stored for origin.
func (c *credentials) find(origin string) (login, bool) {
	for _, l := range c.APIs {
		if o, err := originOf(l.APIURL); err == nil && o == origin {
			return l, true
		}
	}
	return login{}, false
}

// put stores l, replacing the login of the same origin.
func (c *credentials) put(l login) {
	origin, _ := originOf(l.APIURL)
	c.remove(origin)
	c.APIs = append(c.APIs, l)
}

// remove deletes origin's login; false when there was none.
func (c *credentials) remove(origin string) bool {
	n := len(c.APIs)
	c.APIs = slices.DeleteFunc(c.APIs, func(l login) bool {
		o, err := originOf(l.APIURL)
		return err == nil && o == origin
	})
	return len(c.APIs) != n
}

// urls lists the APIs logged in to, for messages.
func (c *credentials) urls() string {
	var us []string
	for _, l := range c.APIs {
		us = append(us, l.APIURL)
	}
	return strings.Join(us, ", ")
}

// credentialsPath is tau login's file: tau/credentials.yaml in the user's
// config directory ($XDG_CONFIG_HOME or ~/.config on Linux, ~/Library/
// Application Support on macOS, %AppData% on Windows).
func credentialsPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("no config directory to keep tau login's tokens in: %w", err)
	}
	return filepath.Join(dir, "tau", "credentials.yaml"), nil
}

// loadCredentials reads tau login's file; empty when there is none.
func loadCredentials() (*credentials, string, error) {
	path, err := credentialsPath()
	if err != nil {
		return nil, "", err
	}
	c, err := readCredentials(path)
	return c, path, err
}

// readCredentials reads a credentials file, refusing one that other users
// can read or write: its tokens may already be theirs.
func readCredentials(path string) (*credentials, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &credentials{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := checkPrivate(path, fi.Mode()); err != nil {
		return nil, err
	}
	c := &credentials{}
	if err := yaml.NewDecoder(f).Decode(c); err != nil && !errors.Is(err, io.EOF) {
		return nil, usageError{fmt.Errorf("cannot read %s: %w; delete it and run tau login again", path, err)}
	}
	return c, nil
}

// checkPrivate refuses a credentials file that others can read or write.
// Windows has no such mode bits; the user's profile directory is private
// there.
func checkPrivate(path string, mode fs.FileMode) error {
	if runtime.GOOS == "windows" || mode.Perm()&0o077 == 0 {
		return nil
	}
	return usageError{fmt.Errorf("%s holds your TauGrid tokens and other users can read it (mode %04o), so tau will not use it;\n"+
		"  make it private:  chmod 600 %s\n"+
		"  then consider asking your platform team for new tokens: others may have read these", path, mode.Perm(), path)}
}

// writeCredentials replaces the file at path with c, readable only by the
// user, in a directory only the user can enter.
func writeCredentials(path string, c *credentials) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	body, err := yaml.Marshal(c)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".credentials-*.yaml") // created 0600
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	_, err = tmp.Write(append([]byte(credentialsHeader), body...))
	if err = errors.Join(err, tmp.Chmod(0o600), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// originOf is the origin a URL's requests go to, normalised so that two
// spellings of one server compare equal: lowercase scheme and host, no
// default port.
func originOf(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" {
		return "", fmt.Errorf("API URL %q: want https://host[:port]", raw)
	}
	if u.User != nil {
		return "", fmt.Errorf("API URL %q carries a user name or password: give the token with tau login instead", raw)
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		port = ""
	}
	if port != "" {
		return scheme + "://" + net.JoinHostPort(host, port), nil
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return scheme + "://" + host, nil
}

// checkTransport refuses an origin that would carry a token in the clear
// over a network: https, or plain http to this machine only.
func checkTransport(origin string) error {
	u, err := url.Parse(origin)
	if err != nil {
		return err
	}
	if u.Scheme == "https" || isLoopback(u.Hostname()) {
		return nil
	}
	return usageError{fmt.Errorf("%s is plain http: anyone on the network between you and it could read your token, so tau no longer sends one there.\n"+
		"  Use the API's https address, or reach it through this machine:  kubectl port-forward, then http://127.0.0.1:<port>", origin)}
}

// isLoopback: localhost, 127.0.0.0/8 and ::1 never leave this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
