package server

import (
	"net/http"
	"time"
)

// Limits of every HTTP server the controller starts. Its endpoints face
// clients that may be hostile (webhooks from the internet, any pod of any
// tenant): a client that sends its headers a byte at a time, never
// finishes its body, never reads its response or keeps idle connections
// open is cut off instead of holding a goroutine and a socket forever.
const (
	ServerReadHeaderTimeout = 10 * time.Second
	ServerReadTimeout       = 30 * time.Second
	ServerWriteTimeout      = 60 * time.Second
	ServerIdleTimeout       = 120 * time.Second
	ServerMaxHeaderBytes    = 64 << 10
	// StreamWriteTimeout bounds each write of a streamed response (a
	// followed log, a large source archive): the stream may last hours,
	// a client that stops reading is dropped after this long.
	StreamWriteTimeout = 30 * time.Second
)

// NewServer returns a server for addr with the limits above. Handlers that
// stream longer than ServerWriteTimeout extend their own deadlines with
// streamResponse.
func NewServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: ServerReadHeaderTimeout,
		ReadTimeout:       ServerReadTimeout,
		WriteTimeout:      ServerWriteTimeout,
		IdleTimeout:       ServerIdleTimeout,
		MaxHeaderBytes:    ServerMaxHeaderBytes,
	}
}

// streamWriter is a response that may outlast the server's WriteTimeout:
// before each write it moves the connection's write deadline to
// StreamWriteTimeout from now, so a live stream goes on while a client
// that stops reading is dropped. Flush flushes each write to the client.
type streamWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// streamResponse prepares w for a long response: the read deadline the
// server set for the request is lifted too, as the request has been read
// and a stream of hours must not hang on how the server treats an expired
// read deadline in the middle of a response.
func streamResponse(w http.ResponseWriter) streamWriter {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	return streamWriter{w: w, rc: rc}
}

func (s streamWriter) Write(p []byte) (int, error) {
	// Not every ResponseWriter supports deadlines (httptest's recorder);
	// the server's own then applies.
	_ = s.rc.SetWriteDeadline(time.Now().Add(StreamWriteTimeout))
	return s.w.Write(p)
}

func (s streamWriter) Flush() { _ = s.rc.Flush() }
