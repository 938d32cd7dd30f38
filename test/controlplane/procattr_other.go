//go:build !linux

package controlplane

import "syscall"

// childAttr puts a child in its own process group. Outside Linux there is no
// Pdeathsig: a crashed test may leave processes behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// deathSigPrefix is empty outside Linux: there is no parent-death signal.
var deathSigPrefix []string
