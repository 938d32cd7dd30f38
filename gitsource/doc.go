// Package gitsource is TauGrid's git side: it turns remote refs into run
// requests and commits into verified source archives, cheaply enough to
// watch thousands of repositories from one controller.
//
// The pieces, in the order a run meets them:
//
//   - Client.ListRefs lists a repository's refs without cloning (one HTTP
//     request on a kept-alive connection, or one SSH session with strict
//     known_hosts), shared between callers asking at once, with a timeout,
//     retries of transient failures and metrics.
//   - Detect, a pure function, compares two observations of the watched
//     refs (Triggers) and returns the runs to start and cancel: run tags,
//     run refs under refs/tau/runs/ (annotated tags whose message is a
//     RunRequest), tau file changes on watched branches. Client.Poll lists,
//     fetches only the objects Detect reads, and calls it.
//   - Client.Archive fetches one commit shallowly into a bounded on-disk
//     cache and builds a deterministic tar.gz of its tree, named by its
//     SHA-256; Client.ReadFile reads one file at a commit.
//   - VerifyTag and VerifyCommit check SSH (sshsig) and OpenPGP signatures
//     against the keys a repository allows.
//   - WebhookHandler turns signed GitHub, GitLab and Gitea/Forgejo push
//     events into nudges: requests to poll now, never runs themselves.
//
// Every error matches one kind (ErrAuth, ErrNotFound, ErrTooLarge,
// ErrUnreachable, ...) with errors.Is, and no error or log line carries a
// credential. The controller never runs the git CLI: everything here is
// go-git and the standard library. URLs must be https, http or ssh.
package gitsource
