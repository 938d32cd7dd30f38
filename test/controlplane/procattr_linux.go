package controlplane

import "syscall"

// childAttr puts a child in its own process group, so that stopping it also stops
// anything it spawned, and asks the kernel to kill it when the process that started
// it dies, so that a crashed or interrupted test leaves nothing running.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// deathSigPrefix is the command line that makes an exec'd program (one started by
// envtest, which sets no Pdeathsig) die with the process that started it.
var deathSigPrefix = []string{"setpriv", "--pdeathsig", "KILL", "--"}
