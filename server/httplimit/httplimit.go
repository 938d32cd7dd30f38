// Package httplimit holds the limits of every HTTP server TauGrid starts,
// the controller's and the node agents'. Their endpoints face clients that
// may be hostile (webhooks from the internet, any pod of any tenant): a
// client that sends its headers a byte at a time, never finishes its body,
// never reads its response or keeps idle connections open is cut off
// instead of holding a goroutine and a socket forever. It imports nothing
// of TauGrid, so the node agent takes it without the controller's code.
package httplimit

import (
	"net/http"
	"time"
)

// The limits.
const (
	ReadHeaderTimeout = 10 * time.Second
	ReadTimeout       = 30 * time.Second
	WriteTimeout      = 60 * time.Second
	IdleTimeout       = 120 * time.Second
	MaxHeaderBytes    = 64 << 10
)

// NewServer returns a server for addr with the limits above. Handlers that
// stream longer than WriteTimeout extend their own deadlines (the runs
// API's followed logs, the source archives).
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		WriteTimeout:      WriteTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
	}
}
