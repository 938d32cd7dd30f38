package gitsource

import "errors"

// Keys of a git credentials Secret: Credentials as the controller reads
// them from the Secret a repository or platform names.
const (
	SecretUsername   = "username"
	SecretPassword   = "password"
	SecretToken      = "token"
	SecretIdentity   = "identity"
	SecretPassphrase = "passphrase"
	SecretKnownHosts = "known_hosts"
	SecretCABundle   = "ca.crt"
)

// ErrMissingSecret is a terminal error: a human must create the Secret.
var ErrMissingSecret = errors.New("credentials Secret not found")
