package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/taugrid/taugrid/render"
)

type fetchOptions struct {
	URL     string
	SHA256  string
	Dest    string
	Timeout time.Duration
	// TokenFile holds the init container's ServiceAccount token, sent as
	// a bearer token; the source server serves nothing without one.
	TokenFile string
	// CheckpointDir and ResumeLink: on a retried attempt, point ResumeLink
	// at the latest complete checkpoint under CheckpointDir.
	CheckpointDir, ResumeLink string
	// TerminationLog: on success, all the command printed is written here
	// too (the container's termination message), so the pod's status
	// holds its whole log (render.SourceContainer).
	TerminationLog string
}

// maxTerminationMessage is what the kubelet keeps of a container's
// termination message; output longer than that is not written there at
// all, so a message is always the whole of what was printed.
const maxTerminationMessage = 4096

// newFetchSourceCmd is the run pods' init container: it downloads the
// commit's source archive from the controller, checks its sha256 before
// unpacking anything, and unpacks it without letting any entry escape the
// destination. Pods never hold git credentials. On a retried attempt it also
// links TAU_RESUME_FROM to the run's latest complete checkpoint.
func newFetchSourceCmd() *cobra.Command {
	opts := &fetchOptions{}
	cmd := &cobra.Command{
		Use:    "fetch-source --url URL --sha256 HEX --dest DIR",
		Short:  "Download, verify and unpack a run's source archive (the init container)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var printed bytes.Buffer
			out := io.MultiWriter(cmd.OutOrStdout(), &printed)
			if err := runFetchSource(cmd.Context(), opts, out); err != nil {
				return err
			}
			writeTerminationLog(opts.TerminationLog, printed.Bytes(), cmd.ErrOrStderr())
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.URL, "url", "", "archive URL")
	cmd.Flags().StringVar(&opts.SHA256, "sha256", "", "expected sha256 of the archive, hex")
	cmd.Flags().StringVar(&opts.Dest, "dest", "", "directory to unpack into")
	cmd.Flags().StringVar(&opts.TokenFile, "token-file", "", "file holding the bearer token for the source server (the pod's projected ServiceAccount token)")
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 10*time.Minute, "download timeout")
	cmd.Flags().StringVar(&opts.CheckpointDir, "checkpoint-dir", "", "the run's checkpoint directory, to resume from")
	cmd.Flags().StringVar(&opts.ResumeLink, "resume-link", "", "link to point at the latest complete checkpoint")
	cmd.Flags().StringVar(&opts.TerminationLog, "termination-log", "", "on success, also write all that was printed to this file (the container's termination message)")
	for _, f := range []string{"url", "sha256", "dest"} {
		_ = cmd.MarkFlagRequired(f)
	}
	return cmd
}

// runFetchSource fetches the source and, on a retried attempt, links the
// checkpoint to resume from, saying what it did on out.
func runFetchSource(ctx context.Context, opts *fetchOptions, out io.Writer) error {
	n, err := fetchSource(ctx, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "unpacked %d entries of %s into %s\n", n, opts.SHA256, opts.Dest)
	if opts.CheckpointDir == "" || opts.ResumeLink == "" {
		return nil
	}
	ckpt, err := linkResume(opts.CheckpointDir, opts.ResumeLink)
	switch {
	case err != nil:
		return fmt.Errorf("finding the checkpoint to resume from: %w", err)
	case ckpt == "":
		fmt.Fprintf(out, "no complete checkpoint under %s (none has %s): starting afresh\n", opts.CheckpointDir, render.CheckpointMarker)
	default:
		fmt.Fprintf(out, "resuming from %s\n", ckpt)
	}
	return nil
}

// writeTerminationLog writes what the command printed to file, when one
// is named and it fits the kubelet's limit. A message that cannot be
// written whole is emptied, never left in part: the sealer then reads
// the container's log instead. Not writing it fails nothing.
func writeTerminationLog(file string, printed []byte, stderr io.Writer) {
	if file == "" || len(printed) > maxTerminationMessage {
		return
	}
	if err := os.WriteFile(file, printed, 0o644); err != nil {
		_ = os.Truncate(file, 0)
		fmt.Fprintf(stderr, "not writing the termination message: %v\n", err)
	}
}

func fetchSource(ctx context.Context, o *fetchOptions) (int, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	tmp, err := os.CreateTemp("", "tau-source-*.tar.gz")
	if err != nil {
		return 0, err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	defer tmp.Close()
	token, err := readToken(o.TokenFile)
	if err != nil {
		return 0, err
	}
	if err := download(ctx, o.URL, token, tmp, o.SHA256); err != nil {
		return 0, err
	}
	if _, err := tmp.Seek(0, io.SeekStart); err != nil {
		return 0, err
	}
	return unpack(tmp, o.Dest)
}

// readToken reads the bearer token from file; "" when no file is named.
// The kubelet rotates the file, so it is read at each fetch.
func readToken(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the source token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// download writes the body to w and fails unless its sha256 is want.
func download(ctx context.Context, url, token string, w io.Writer, want string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := tokenClient(0).Do(req) // the context bounds it
	if err != nil {
		return fmt.Errorf("downloading the source archive: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("downloading the source archive: %s", resp.Status)
	}
	h := sha256.New()
	if _, err := io.Copy(io.MultiWriter(w, h), resp.Body); err != nil {
		return fmt.Errorf("downloading the source archive: %w", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(want) {
		return fmt.Errorf("source archive sha256 is %s, want %s: refusing to unpack it", got, want)
	}
	return nil
}

// unpack extracts a verified tar.gz into dest: regular files, directories
// and symlinks, each confined to dest.
func unpack(r io.Reader, dest string) (int, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return 0, err
	}
	tr := tar.NewReader(zr)
	root, err := os.OpenRoot(dest)
	if err != nil {
		if err := os.MkdirAll(dest, 0o755); err != nil {
			return 0, err
		}
		if root, err = os.OpenRoot(dest); err != nil {
			return 0, err
		}
	}
	defer func() { _ = root.Close() }()
	n := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if err := extract(root, tr, h); err != nil {
			return n, fmt.Errorf("%s: %w", h.Name, err)
		}
		n++
	}
}

func extract(root *os.Root, tr *tar.Reader, h *tar.Header) error {
	name := filepath.Clean(h.Name)
	if filepath.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
		return errors.New("entry escapes the destination")
	}
	switch h.Typeflag {
	case tar.TypeDir:
		return root.MkdirAll(name, 0o755)
	case tar.TypeSymlink:
		// os.Root refuses to follow a link out of the root, so a link that
		// points outside stays a dangling link, never a way out.
		return root.Symlink(h.Linkname, name)
	case tar.TypeReg:
		if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode&0o755)|0o400)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, tr)
		return errors.Join(err, f.Close())
	}
	return nil
}
