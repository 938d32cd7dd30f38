package server

import (
	"net/http"
	"time"
)

// StreamWriteTimeout bounds each write of a streamed response (a followed
// log, a large source archive) served by httplimit.NewServer's servers:
// the stream may last hours, a client that stops reading is dropped after
// this long.
const StreamWriteTimeout = 30 * time.Second

// streamWriter is a response that may outlast the server's write timeout
// (httplimit.WriteTimeout): before each write it moves the connection's write deadline to
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
