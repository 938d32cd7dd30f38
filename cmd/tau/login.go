package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"
)

type loginOptions struct {
	APIURL     string
	TokenStdin bool
}

func newLoginCmd() *cobra.Command {
	o := &loginOptions{}
	cmd := &cobra.Command{
		Use:   "login --api-url URL",
		Short: "Check your team's token with a TauGrid API and store it for that API only",
		Long: `Login asks the TauGrid API which namespace the token reads, and only if the
API accepts it stores the token for that API's origin in tau/credentials.yaml
under your config directory ($XDG_CONFIG_HOME or ~/.config on Linux,
~/Library/Application Support on macOS, %AppData% on Windows), readable only
by you. One token per API; log in to several APIs to keep several.

tau then sends that token to that API and nowhere else: not to an api_url
that a repository's .tau/config.yaml names unless it is this API, and not
along a redirect to another server. TAU_TOKEN still works, for the API you
name with --api-url or TAU_API_URL.

The token comes from stdin with --token-stdin, else from TAU_TOKEN, else
from a hidden prompt; never from an argument, which other users see in ps.`,
		Example: `  tau login --api-url https://tau.example.com
  tau login --api-url https://tau.example.com --token-stdin < team-a.token
  TAU_TOKEN=... tau login --api-url https://tau.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLogin(cmd, o)
		},
	}
	cmd.Flags().StringVar(&o.APIURL, "api-url", "", "the TauGrid API (default: $TAU_API_URL)")
	cmd.Flags().BoolVar(&o.TokenStdin, "token-stdin", false, "read the token from stdin")
	return cmd
}

func runLogin(cmd *cobra.Command, o *loginOptions) error {
	raw, origin, err := loginURL(o.APIURL)
	if err != nil {
		return err
	}
	token, err := loginToken(cmd, o, origin)
	if err != nil {
		return err
	}
	api := &apiSource{base: strings.TrimSuffix(raw, "/"), token: token, http: tokenClient(0)}
	ns, err := api.whoami(contextOf(cmd))
	if err != nil {
		var nf notFoundError
		if errors.As(err, &nf) {
			return usageError{fmt.Errorf("%s has no /api/v1/whoami to check the token with (not a TauGrid API, or one older than tau login); nothing stored", origin)}
		}
		return fmt.Errorf("%w; nothing stored", err)
	}
	creds, path, err := loadCredentials()
	if err != nil {
		return err
	}
	creds.put(login{APIURL: api.base, Token: token})
	if err := writeCredentials(path, creds); err != nil {
		return fmt.Errorf("storing the token: %w", err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Logged in to %s: the token reads namespace %s.\nStored in %s, readable only by you; tau sends it to %s and nowhere else.\n",
		origin, ns, path, origin)
	return nil
}

// loginURL is the API to log in to: the flag, else TAU_API_URL. Never the
// repository's api_url unasked: logging in is how the user says they
// trust it.
func loginURL(flagURL string) (raw, origin string, err error) {
	raw = firstOf(flagURL, os.Getenv("TAU_API_URL"))
	if raw == "" {
		msg := "name the API to log in to: tau login --api-url https://<your TauGrid API>"
		if p := loadProject("."); p.APIURL != "" {
			msg += fmt.Sprintf(" (%s names %s; log in to it if you trust it)", displayPath(p.path), p.APIURL)
		}
		return "", "", usageError{errors.New(msg)}
	}
	if origin, err = originOf(raw); err != nil {
		return "", "", usageError{err}
	}
	return raw, origin, checkTransport(origin)
}

// loginToken reads the token from stdin (--token-stdin), TAU_TOKEN, or a
// hidden prompt on a terminal.
func loginToken(cmd *cobra.Command, o *loginOptions, origin string) (string, error) {
	in := cmd.InOrStdin()
	switch {
	case o.TokenStdin:
		b, err := io.ReadAll(io.LimitReader(in, 64<<10))
		if err != nil {
			return "", err
		}
		return checkToken(string(b), "stdin")
	case os.Getenv("TAU_TOKEN") != "":
		fmt.Fprintln(cmd.ErrOrStderr(), "Using the token in TAU_TOKEN.")
		return checkToken(os.Getenv("TAU_TOKEN"), "TAU_TOKEN")
	}
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return "", usageError{errors.New("no token: pipe it in with --token-stdin (tau never takes a token as an argument, where ps would show it)")}
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "Paste your team's token for %s (it is not shown): ", origin)
	b, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(cmd.ErrOrStderr())
	if err != nil {
		return "", err
	}
	return checkToken(string(b), "the prompt")
}

// checkToken trims a token and refuses one that cannot be a header value.
func checkToken(s, from string) (string, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return "", usageError{fmt.Errorf("no token on %s", from)}
	case strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return "", usageError{fmt.Errorf("the token on %s has spaces, several lines or control characters: give the token alone", from)}
	}
	return s, nil
}

func newLogoutCmd() *cobra.Command {
	var apiURL string
	cmd := &cobra.Command{
		Use:   "logout [--api-url URL]",
		Short: "Delete the token tau login stored for a TauGrid API",
		Long: `Logout deletes the token tau login stored for one API. The token itself
keeps working until your platform team revokes it.`,
		Example: `  tau logout --api-url https://tau.example.com
  tau logout     # the one API you are logged in to`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLogout(cmd, firstOf(apiURL, os.Getenv("TAU_API_URL")))
		},
	}
	cmd.Flags().StringVar(&apiURL, "api-url", "", "the TauGrid API (default: $TAU_API_URL, else the one you are logged in to)")
	return cmd
}

func runLogout(cmd *cobra.Command, raw string) error {
	creds, path, err := loadCredentials()
	if err != nil {
		return err
	}
	switch {
	case len(creds.APIs) == 0:
		return usageError{errors.New("you are not logged in to any TauGrid API")}
	case raw == "" && len(creds.APIs) > 1:
		return usageError{fmt.Errorf("you are logged in to several TauGrid APIs (%s): choose one with --api-url", creds.urls())}
	case raw == "":
		raw = creds.APIs[0].APIURL
	}
	origin, err := originOf(raw)
	if err != nil {
		return usageError{err}
	}
	if !creds.remove(origin) {
		return usageError{fmt.Errorf("you are not logged in to %s (you are to: %s)", origin, creds.urls())}
	}
	if err := writeCredentials(path, creds); err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Logged out of %s: its token is deleted from %s. The token itself works until your platform team revokes it.\n", origin, path)
	return nil
}
