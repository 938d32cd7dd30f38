package images

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// podman runs containers as the chart's pods would run them, from a store
// of its own under the test's directory (nothing is left in the machine's).
type podman struct {
	t    *testing.T
	root string
}

// needPodman finds podman and runc: a test that needs them fails under
// CI=true without them and is skipped, saying why, elsewhere.
func needPodman(t *testing.T) *podman {
	t.Helper()
	var missing []string
	for _, tool := range []string{"podman", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	why := ""
	switch {
	case len(missing) > 0:
		why = "needs " + strings.Join(missing, " and ") + " (apt-get install podman runc; .ci/run installs them)"
	case os.Geteuid() != 0:
		why = "runs containers with podman as root (runc, host network); run as root"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	dir, err := os.MkdirTemp("", "tau-podman-")
	if err != nil {
		t.Fatal(err)
	}
	p := &podman{t: t, root: dir}
	t.Cleanup(func() {
		_, _ = p.run("rm", "--all", "--force", "--time", "2")
		_ = os.RemoveAll(dir)
	})
	return p
}

// run runs one podman command, with the flags this kernel needs: runc
// (crun refuses its hybrid cgroups) and cgroupfs.
func (p *podman) run(args ...string) (string, error) {
	all := append([]string{"--root", filepath.Join(p.root, "store"), "--runroot", filepath.Join(p.root, "run"),
		"--storage-driver", "vfs", "--runtime", "runc", "--cgroup-manager", "cgroupfs", "--events-backend", "file"}, args...)
	cmd := exec.Command("podman", all...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

func (p *podman) must(args ...string) string {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatal(err)
	}
	return out
}

// load takes the image tagged tag from an OCI layout and names it ref, as
// a pull of ref from the registry would.
func (p *podman) load(layout, tag, ref string) {
	p.t.Helper()
	id := strings.TrimSpace(p.must("pull", "--quiet", "oci:"+layout+":"+tag))
	p.must("tag", id, ref)
}

// pod is what the kubelet would give a container: its env with the
// downward API resolved, and a host directory for each volume it mounts.
type pod struct {
	env     map[string]string // fieldRef path -> value
	extra   []string          // further env, e.g. KUBERNETES_SERVICE_HOST
	volumes map[string]string // volume name -> host directory
	hosts   []string          // --add-host entries (cluster DNS names)
}

// runArgs are podman run's flags for c exactly as rendered: command,
// args, env, user, read-only root, capabilities and mounts.
func runArgs(t *testing.T, c corev1.Container, podSec *corev1.PodSecurityContext, p pod) []string {
	t.Helper()
	args := []string{"--network", "host", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "--read-only-tmpfs=false"}
	sc := c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	uid, gid := sc.RunAsUser, sc.RunAsGroup
	if podSec != nil { // the container's own setting wins, as in Kubernetes
		uid, gid = cmp.Or(uid, podSec.RunAsUser), cmp.Or(gid, podSec.RunAsGroup)
	}
	if uid == nil || gid == nil {
		t.Fatalf("container %s runs with no runAsUser and runAsGroup from it or its pod", c.Name)
	}
	args = append(args, "--user", fmt.Sprintf("%d:%d", *uid, *gid))
	if podSec != nil && podSec.FSGroup != nil {
		args = append(args, "--group-add", fmt.Sprint(*podSec.FSGroup))
	}
	if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
		args = append(args, "--read-only")
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		args = append(args, "--security-opt", "no-new-privileges")
	}
	if sc.Capabilities != nil {
		for _, d := range sc.Capabilities.Drop {
			args = append(args, "--cap-drop", string(d))
		}
	}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				t.Fatalf("env %s: only fieldRef is resolved here", e.Name)
			}
			v = p.env[e.ValueFrom.FieldRef.FieldPath]
		}
		args = append(args, "--env", e.Name+"="+v)
	}
	for _, e := range p.extra {
		args = append(args, "--env", e)
	}
	for _, h := range p.hosts {
		args = append(args, "--add-host", h)
	}
	for _, m := range c.VolumeMounts {
		dir, ok := p.volumes[m.Name]
		if !ok {
			t.Fatalf("container %s mounts volume %s, which the test does not provide", c.Name, m.Name)
		}
		opt := ""
		if m.ReadOnly {
			opt = ":ro"
		}
		args = append(args, "--volume", dir+":"+m.MountPath+opt)
	}
	if len(c.Command) > 0 {
		ep, _ := json.Marshal(c.Command)
		args = append(args, "--entrypoint", string(ep))
	}
	return append(append(args, c.Image), c.Args...)
}

// emptyDir is a volume as the kubelet makes one: a fresh world-writable
// directory.
func emptyDir(t *testing.T) string {
	t.Helper()
	d, err := os.MkdirTemp("", "tau-volume-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	if err := os.Chmod(d, 0o777); err != nil {
		t.Fatal(err)
	}
	return d
}
