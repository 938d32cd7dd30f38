package server

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/taugrid/taugrid/server/httplimit"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestEveryServerHasReadWriteIdleAndHeaderLimits(t *testing.T) {
	s := httplimit.NewServer(":0", http.NotFoundHandler())
	if s.ReadHeaderTimeout == 0 || s.ReadTimeout == 0 || s.WriteTimeout == 0 || s.IdleTimeout == 0 || s.MaxHeaderBytes == 0 {
		t.Errorf("server limits: header %v, read %v, write %v, idle %v, header bytes %d; want all set",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
}

// serve starts s on a loopback port and returns its address.
func serve(t *testing.T, s *http.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return l.Addr().String()
}

// TestASlowlorisClientIsCutOff sends headers a line at a time, slower than
// the server allows: the server closes the connection at its header
// timeout instead of waiting for the last header forever.
func TestASlowlorisClientIsCutOff(t *testing.T) {
	s := httplimit.NewServer("", http.NotFoundHandler())
	s.ReadHeaderTimeout = 300 * time.Millisecond // the real 10 s, shortened for the test
	conn, err := net.Dial("tcp", serve(t, s))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "GET /api/v1/namespaces/a/runs HTTP/1.1\r\nHost: tau\r\n"); err != nil {
		t.Fatal(err)
	}
	cut := make(chan error, 1)
	go func() { // the server's answer, or its closing the connection
		_, err := conn.Read(make([]byte, 1))
		cut <- err
	}()
	for i := 0; ; i++ {
		select {
		case err := <-cut:
			if i > 30 {
				t.Errorf("cut off after %d header lines, want within the header timeout", i)
			}
			if err == nil {
				t.Log("the server answered (408) and closed")
			}
			return
		case <-time.After(50 * time.Millisecond):
			if i > 200 {
				t.Fatal("still connected after 200 slow header lines")
			}
			_, _ = fmt.Fprintf(conn, "X-Slow-%d: a\r\n", i) // may fail once cut off
		}
	}
}

// TestAStreamOutlastsTheServersReadAndWriteTimeouts streams for longer
// than both timeouts through streamResponse: the stream goes on and the
// request's context stays alive, while a plain response is cut at the
// write timeout.
func TestAStreamOutlastsTheServersReadAndWriteTimeouts(t *testing.T) {
	const lines = 8
	mux := http.NewServeMux()
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		sw := streamResponse(w)
		for i := range lines {
			if r.Context().Err() != nil {
				return
			}
			fmt.Fprintf(sw, "line %d\n", i)
			sw.Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		for i := range lines {
			fmt.Fprintf(w, "line %d\n", i)
			w.(http.Flusher).Flush()
			time.Sleep(100 * time.Millisecond)
		}
	})
	s := httplimit.NewServer("", mux)
	s.ReadTimeout, s.WriteTimeout = 250*time.Millisecond, 250*time.Millisecond
	addr := serve(t, s)
	read := func(path string) (int, error) {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		n := 0
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "line ") {
				n++
			}
		}
		return n, sc.Err()
	}
	if n, err := read("/stream"); n != lines || err != nil {
		t.Errorf("stream: %d lines (%v), want all %d", n, err, lines)
	}
	if n, err := read("/plain"); n == lines && err == nil {
		t.Errorf("plain response: all %d lines, want it cut at the write timeout", n)
	} else if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Logf("plain response cut: %v", err)
	}
}
