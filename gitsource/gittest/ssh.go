package gittest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// SSHServer is an in-process SSH server that runs the real `git
// upload-pack` for `ssh://git@host/name.git` URLs, accepting only the
// client key it was given.
type SSHServer struct {
	Addr    string        // host:port it listens on
	HostKey ssh.PublicKey // its host key, for known_hosts

	root     string
	listener net.Listener
	wg       sync.WaitGroup
}

// NewSSHKey returns a fresh ed25519 key as an OpenSSH private key PEM and
// its public key.
func NewSSHKey() ([]byte, ssh.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "test")
	if err != nil {
		return nil, nil, err
	}
	sshPub, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(block), sshPub, nil
}

// StartSSHServer serves the bare repositories under root to clients holding
// the private key of clientKey.
func StartSSHServer(root string, clientKey ssh.PublicKey) (*SSHServer, error) {
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	hostSigner, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		return nil, err
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(key.Marshal(), clientKey.Marshal()) {
				return &ssh.Permissions{}, nil
			}
			return nil, errors.New("unknown key")
		},
	}
	cfg.AddHostKey(hostSigner)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &SSHServer{Addr: l.Addr().String(), HostKey: hostSigner.PublicKey(), root: root, listener: l}
	s.wg.Add(1)
	go s.accept(cfg)
	return s, nil
}

// Close stops the server and waits for its connections to end.
func (s *SSHServer) Close() {
	_ = s.listener.Close()
	s.wg.Wait()
}

func (s *SSHServer) accept(cfg *ssh.ServerConfig) {
	defer s.wg.Done()
	for {
		c, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c, cfg)
		}()
	}
}

func (s *SSHServer) serveConn(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	conn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer func() { _ = conn.Close() }()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			_ = nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			return
		}
		s.serveSession(ch, chReqs)
	}
}

func (s *SSHServer) serveSession(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer func() { _ = ch.Close() }()
	for req := range reqs {
		if req.Type != "exec" {
			_ = req.Reply(req.Type == "env", nil)
			continue
		}
		var payload struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
			_ = req.Reply(false, nil)
			return
		}
		_ = req.Reply(true, nil)
		status := s.exec(ch, payload.Command)
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], status)
		_, _ = ch.SendRequest("exit-status", false, b[:])
		return
	}
}

// exec runs `git-upload-pack '/name.git'` against the server's root.
func (s *SSHServer) exec(ch ssh.Channel, command string) uint32 {
	verb, arg, ok := strings.Cut(command, " ")
	if !ok || verb != "git-upload-pack" {
		fmt.Fprintf(ch.Stderr(), "unsupported command\n")
		return 1
	}
	name := strings.Trim(arg, "'\"")
	dir := filepath.Join(s.root, filepath.Clean("/"+name))
	cmd := exec.Command("git", "upload-pack", dir)
	cmd.Env = Env(s.root)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = ch, ch, ch.Stderr()
	if err := cmd.Run(); err != nil {
		return 128
	}
	return 0
}
