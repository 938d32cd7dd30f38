package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/evidence"
)

type evidenceVerifyOptions struct {
	statusOptions
	Run string // namespace/name, to pick one run's bundles from a store directory
	Key string // the attestations' public key file (cosign.pub)
}

func newEvidenceCmd() *cobra.Command {
	o := &statusOptions{}
	cmd := &cobra.Command{
		Use:   "evidence <run-id> | evidence verify ...",
		Short: "Print a run's evidence page, or verify its evidence bundles",
		Example: `  tau evidence r-20261130-101500-3f9a2c          # the link to the run's evidence page
  tau evidence verify r-20261130-101500-3f9a2c   # recompute every digest, re-render the manifests`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			page, err := evidenceURLOf(cmd, o, args[0])
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), page)
			return nil
		},
	}
	sourceFlags(cmd, o)
	cmd.AddCommand(newEvidenceVerifyCmd())
	return cmd
}

func newEvidenceVerifyCmd() *cobra.Command {
	o := &evidenceVerifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify <run-id | evidence page URL | store directory>",
		Short: "Recompute every digest of a run's evidence and re-render its manifests",
		Long: `Verify reads a run's sealed evidence bundles, recomputes the sha256 of every
artifact, and re-renders the Kubernetes manifests from the recorded tau file,
policy files and render inputs, which must reproduce the recorded manifests
byte for byte. It reads from the evidence page (a run id is looked up with
the runs API, or your kubeconfig, for its evidence URL) or from a store
directory.

It then checks each bundle's signed in-toto attestation: the signature, with
the public key of --key (the cosign.pub your platform team gives you), or
else the key the evidence page serves when the page is on a TauGrid API you
logged in to or named; every subject's digest; and every predicate field
against the bundle. Without a key it says the attestation was not checked.`,
		Example: "  tau evidence verify r-20261130-1a2b\n  tau evidence verify https://tau.example/runs/team-a/research-1a2b --key cosign.pub\n" +
			"  tau evidence verify /var/lib/taugrid/evidence --run team-a/research-1a2b --key cosign.pub",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runEvidenceVerify(cmd, o, args[0])
		},
	}
	statusFlags(cmd, &o.statusOptions)
	cmd.Flags().StringVar(&o.Run, "run", "", "namespace/name: verify only this run's bundles of a store directory")
	cmd.Flags().StringVar(&o.Key, "key", "", "public key file (cosign.pub, PEM) the attestations must verify with")
	return cmd
}

func runEvidenceVerify(cmd *cobra.Command, o *evidenceVerifyOptions, arg string) error {
	ctx := contextOf(cmd)
	key, err := readPublicKey(o.Key)
	if err != nil {
		return err
	}
	var reports []*evidence.Report
	switch {
	case strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://"):
		reports, err = verifyPageOf(ctx, o.APIURL, arg, key)
	case isDir(arg):
		reports, err = verifyStoreDir(ctx, arg, o.Run, key)
	default:
		var page string
		if page, err = evidenceURLOf(cmd, &o.statusOptions, arg); err == nil {
			reports, err = verifyPageOf(ctx, o.APIURL, page, key)
		}
	}
	if err != nil {
		return err
	}
	if len(reports) == 0 {
		return errors.New("no sealed evidence bundle found (bundles are sealed when an attempt ends)")
	}
	return printReports(cmd.OutOrStdout(), o.Output, reports)
}

// readPublicKey reads --key; nil when it is not given.
func readPublicKey(path string) (*evidence.PublicKey, error) {
	if path == "" {
		return nil, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Errorf("--key: %w", err)}
	}
	k, err := evidence.ParsePublicKey(data)
	if err != nil {
		return nil, usageError{fmt.Errorf("--key %s: %w (want the PEM public key an auditor passes to cosign --key)", path, err)}
	}
	return k, nil
}

// noKey is the note of a bundle whose attestation was not checked.
const noKey = "attestation: not checked, no key: pass --key cosign.pub (your platform team gives it; the evidence page shows it)"

// verifyBundle verifies a bundle, and its attestation when there is a key.
func verifyBundle(ctx context.Context, raw []byte, blobs evidence.BlobReader, envelope []byte, key *evidence.PublicKey, why string) *evidence.Report {
	if key == nil {
		r := evidence.Verify(ctx, raw, blobs)
		r.Notes = append(r.Notes, why)
		return r
	}
	return evidence.VerifyAttested(ctx, raw, blobs, envelope, key)
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// evidenceURLOf finds a run through the API (or a kubeconfig) and returns
// its evidence page.
func evidenceURLOf(cmd *cobra.Command, o *statusOptions, id string) (string, error) {
	src, err := openSource(o)
	if err != nil {
		return "", err
	}
	run, err := src.Get(contextOf(cmd), id)
	if err != nil {
		return "", err
	}
	if run.Status.EvidenceURL == "" {
		return "", notFoundError{fmt.Errorf("run %s has no evidence page yet (it is sealed when an attempt ends, and needs the controller's --evidence-url)", id)}
	}
	return run.Status.EvidenceURL, nil
}

// verifyStoreDir verifies the bundles of a filesystem store, or of one run.
func verifyStoreDir(ctx context.Context, dir, run string, key *evidence.PublicKey) ([]*evidence.Report, error) {
	if _, err := os.Stat(filepath.Join(dir, "bundles")); err != nil {
		return nil, fmt.Errorf("%s is not an evidence store (no bundles/ directory)", dir)
	}
	st := &evidence.FileStore{Root: dir}
	ns, name, _ := strings.Cut(run, "/")
	entries, err := st.Manifests(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(entries, func(a, b evidence.Entry) int { return strings.Compare(a.Path, b.Path) })
	var reports []*evidence.Report
	for _, e := range entries {
		raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(e.Path)))
		if err != nil {
			return nil, err
		}
		var env []byte
		if k, ok := evidence.KeyOfPath(e.Path); ok && key != nil {
			if env, err = st.Attestation(ctx, k); err != nil && !errors.Is(err, evidence.ErrNotFound) {
				return nil, err
			}
		}
		reports = append(reports, verifyBundle(ctx, raw, st, env, key, noKey))
	}
	return reports, nil
}

// verifyPageOf verifies an evidence page with the token of the page's own
// origin, if the user has one for it: the page's link is signed, and a
// token never goes to an origin it was not issued for.
func verifyPageOf(ctx context.Context, flagURL, page string, key *evidence.PublicKey) ([]*evidence.Report, error) {
	choice, err := userAPIChoice(flagURL)
	if err != nil {
		return nil, err
	}
	origin, err := originOf(page)
	if err != nil {
		return nil, usageError{fmt.Errorf("evidence page %s: want https://host/runs/<namespace>/<name>", stripQuery(page))}
	}
	return verifyPage(ctx, page, choice.tokenFor(origin), key)
}

// pageBlobs reads artifacts through the evidence page of one run, with
// the page URL's signed link if it has one and the token of the page's
// origin if the user has one.
type pageBlobs struct {
	base, run string // scheme://host and /runs/<ns>/<name>
	link      string // the signed link's query, carried on every request
	token     string
	client    *http.Client
}

func (p *pageBlobs) Blob(ctx context.Context, digest string) ([]byte, error) {
	return p.get(ctx, p.run+"/blobs/"+digest, "")
}

func (p *pageBlobs) get(ctx context.Context, path, accept string) ([]byte, error) {
	if !strings.HasPrefix(path, "/") { // base+"@host/..." would be another origin
		return nil, fmt.Errorf("the evidence page links to %q, outside its own server", stripQuery(path))
	}
	target := p.base + path
	if p.link != "" && !strings.Contains(path, "?") {
		target += "?" + p.link
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, err
	}
	if p.token != "" {
		req.Header.Set("Authorization", "Bearer "+p.token)
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		// url.Error names the whole URL, signed link and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("GET %s: %w", stripQuery(path), err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized && p.token == "":
		return nil, fmt.Errorf("GET %s: %s: the page needs your team's token, and tau sends a token only to an API you named or logged in to.\n"+
			"  If %s is your TauGrid API:  tau login --api-url %s   (or export TAU_API_URL=%s with TAU_TOKEN)\n"+
			"  Or use the evidence link from the commit, which is signed", stripQuery(path), resp.Status, p.base, p.base, p.base)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("GET %s: %s", stripQuery(path), resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 64<<20))
}

// verifyPage verifies every bundle the evidence page lists, sending token
// (if any) to the page's origin only. Without key, it verifies the
// attestations with the key the page serves only when the user trusts the
// page's origin with a token: a link alone could come from anyone's server.
func verifyPage(ctx context.Context, page, token string, key *evidence.PublicKey) ([]*evidence.Report, error) {
	u, err := url.Parse(page)
	if err != nil {
		return nil, err
	}
	p := &pageBlobs{base: u.Scheme + "://" + u.Host, run: strings.TrimSuffix(u.Path, ".json"), link: u.RawQuery,
		token: token, client: tokenClient(30 * time.Second)}
	data, err := p.get(ctx, p.run, "application/json")
	if err != nil {
		return nil, err
	}
	var v evidence.View
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, fmt.Errorf("%s is not an evidence page: %w", stripQuery(page), err)
	}
	why := noKey
	if key == nil && token != "" && v.SigningKey != nil {
		if key, err = pageKey(ctx, p, v.SigningKey); err != nil {
			return nil, err
		}
	} else if key == nil && token == "" {
		why = "attestation: not checked: the key this page serves is only as good as the page, and you have not logged in to " + p.base + ": pass --key cosign.pub from your platform team"
	}
	var reports []*evidence.Report
	for _, b := range v.Bundles {
		raw, err := p.get(ctx, b.Manifest, "")
		if err != nil {
			return nil, err
		}
		var env []byte
		if b.Attestation != "" && key != nil {
			if env, err = p.get(ctx, b.Attestation, ""); err != nil {
				return nil, err
			}
		}
		r := verifyBundle(ctx, raw, p, env, key, why)
		if r.Digest != b.Digest {
			r.Problems = append(r.Problems, fmt.Sprintf("the page lists digest %s, the manifest is %s", b.Digest, r.Digest))
		}
		reports = append(reports, r)
	}
	return reports, nil
}

// pageKey fetches the attestations' key from the page and checks it is
// the one the page names.
func pageKey(ctx context.Context, p *pageBlobs, sk *evidence.SigningKey) (*evidence.PublicKey, error) {
	data, err := p.get(ctx, sk.URL, "")
	if err != nil {
		return nil, err
	}
	k, err := evidence.ParsePublicKey(data)
	if err != nil {
		return nil, fmt.Errorf("the key the evidence page serves: %w", err)
	}
	if k.Fingerprint != sk.Fingerprint {
		return nil, fmt.Errorf("the evidence page names key %s but serves %s", sk.Fingerprint, k.Fingerprint)
	}
	return k, nil
}

// stripQuery drops a signed link's query: errors never show the capability.
func stripQuery(path string) string {
	p, _, _ := strings.Cut(path, "?")
	return p
}

func printReports(w io.Writer, format string, reports []*evidence.Report) error {
	failed := slices.ContainsFunc(reports, func(r *evidence.Report) bool { return !r.OK() })
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(map[string]any{"schema_version": 1, "verified": !failed, "bundles": reports}); err != nil {
			return err
		}
	} else {
		for _, r := range reports {
			printReport(w, r)
		}
	}
	if failed {
		return reportedError{errors.New("evidence does not verify")}
	}
	return nil
}

// printReport says what was checked: each subject, the key and what the
// predicate attests; or what failed.
func printReport(w io.Writer, r *evidence.Report) {
	if !r.OK() {
		fmt.Fprintf(w, "%s %s: FAILED\n", r.Key, r.Digest)
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  %s\n", p)
		}
		return
	}
	fmt.Fprintf(w, "%s %s: verified (%d artifacts, manifests reproduced byte for byte)\n", r.Key, r.Digest, r.Checked)
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  %s\n", n)
	}
	a := r.Attestation
	if a == nil {
		return
	}
	fmt.Fprintf(w, "  attestation verified: signed by key %s, predicate %s\n", a.Signer, a.PredicateType)
	fmt.Fprintf(w, "    repository %s at commit %s\n", orUnrecorded(a.Repository), orUnrecorded(a.Commit))
	fmt.Fprintf(w, "    policy commit %s, digest %s\n", orUnrecorded(a.PolicyCommit), orUnrecorded(a.PolicyDigest))
	fmt.Fprintf(w, "    %d subjects, each digest matched:\n", len(a.Subjects))
	for _, s := range a.Subjects {
		fmt.Fprintf(w, "      sha256:%s  %s\n", s.SHA256, s.Name)
	}
}

func orUnrecorded(s string) string {
	if s == "" {
		return "(not recorded)"
	}
	return s
}
