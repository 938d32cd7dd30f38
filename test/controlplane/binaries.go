package controlplane

import (
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Names of the binaries hack/testbin.sh builds.
const (
	BinEtcd              = "etcd"
	BinKubeAPIServer     = "kube-apiserver"
	BinKueue             = "kueue"
	BinKubeRay           = "kuberay-operator"
	BinControllerManager = "kube-controller-manager"
	BinScheduler         = "kube-scheduler"
	BinKwok              = "kwok"
	BinKwokctl           = "kwokctl"
)

// Modules whose pinned versions (the main go.mod) the binaries and CRDs must match.
const (
	kueueModule   = "sigs.k8s.io/kueue"
	kubeRayModule = "github.com/ray-project/kuberay/ray-operator"
)

// BinaryDir returns the directory holding the control-plane binaries: $TAU_TESTBIN
// if set, else the cache directory `hack/testbin.sh --dir` names. It fails, naming
// the binary and the fix, when etcd or kube-apiserver is missing there; use
// RequireBinaries for the others.
func BinaryDir() (string, error) {
	dir := os.Getenv("TAU_TESTBIN")
	if dir == "" {
		root, err := RepoRoot()
		if err != nil {
			return "", fmt.Errorf("finding the test binaries: %w (or set TAU_TESTBIN)", err)
		}
		out, err := exec.Command(filepath.Join(root, "hack", "testbin.sh"), "--dir").Output()
		if err != nil {
			return "", fmt.Errorf("hack/testbin.sh --dir: %w", exitDetail(err))
		}
		dir = strings.TrimSpace(string(out))
	}
	if err := RequireBinaries(dir, BinEtcd, BinKubeAPIServer); err != nil {
		return "", err
	}
	return dir, nil
}

// RequireBinaries checks that each named binary is in dir, executable, and (for
// Kueue and KubeRay) built from the version the main go.mod pins.
func RequireBinaries(dir string, names ...string) error {
	for _, name := range names {
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		if err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
			return fmt.Errorf("control-plane binary %s is missing from %s: run make testbin", name, dir)
		}
		if err := checkPinned(name, path); err != nil {
			return err
		}
	}
	return nil
}

// checkPinned compares a binary's module version (from its Go build info) with the
// one go.mod pins, so that a cache from an older pin is not silently used.
func checkPinned(name, path string) error {
	module := map[string]string{BinKueue: kueueModule, BinKubeRay: kubeRayModule}[name]
	if module == "" {
		return nil
	}
	mod, err := pinnedModule(module)
	if err != nil {
		return err
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		return fmt.Errorf("control-plane binary %s: %w: run make testbin", path, err)
	}
	if info.Main.Path != module {
		return fmt.Errorf("control-plane binary %s is built from %s, not %s: run make testbin", path, info.Main.Path, module)
	}
	if info.Main.Version != mod.Version {
		return fmt.Errorf("control-plane binary %s is %s %s but go.mod pins %s: run make testbin",
			path, module, info.Main.Version, mod.Version)
	}
	return nil
}

// RepoRoot returns the TauGrid checkout containing the working directory: the
// nearest parent holding hack/testbin.sh.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "hack", "testbin.sh")); err == nil {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no hack/testbin.sh in %s or any parent", dir)
		}
	}
}

// module is what `go list -m -json` says about a dependency.
type module struct {
	Path, Version, Dir string
}

var (
	modulesOnce sync.Once
	modules     map[string]module
	modulesErr  error
)

// pinnedModule returns the version go.mod pins for path and its directory in the
// module cache, downloading it if the cache lacks it.
func pinnedModule(path string) (module, error) {
	modulesOnce.Do(func() { modules, modulesErr = listModules(kueueModule, kubeRayModule) })
	if modulesErr != nil {
		return module{}, modulesErr
	}
	return modules[path], nil
}

func listModules(paths ...string) (map[string]module, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	// go mod download fills the cache if needed and prints each module's Dir.
	cmd := exec.Command("go", append([]string{"mod", "download", "-json"}, paths...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go mod download %s: %w", strings.Join(paths, " "), exitDetail(err))
	}
	mods := map[string]module{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var m module
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go mod download: %w", err)
		}
		mods[m.Path] = m
	}
	for _, p := range paths {
		if mods[p].Dir == "" {
			return nil, fmt.Errorf("module %s is not in the module cache and could not be downloaded", p)
		}
	}
	return mods, nil
}

// KueueCRDDir is the directory of Kueue's CRDs in the pinned module, read in place.
func KueueCRDDir() (string, error) {
	m, err := pinnedModule(kueueModule)
	return filepath.Join(m.Dir, "config", "components", "crd", "bases"), err
}

// KubeRayCRDDir is the directory of KubeRay's CRDs in the pinned module, read in place.
func KubeRayCRDDir() (string, error) {
	m, err := pinnedModule(kubeRayModule)
	return filepath.Join(m.Dir, "config", "crd", "bases"), err
}

// exitDetail adds a failed command's stderr to its error.
func exitDetail(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && len(ee.Stderr) > 0 {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(ee.Stderr)))
	}
	return err
}
