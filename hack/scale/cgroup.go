package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// memoryCgroup is a memory cgroup made for the controller, with a limit,
// as a container's would be: the controller reads its own limit from it
// (--memory-limit-ratio) exactly as it does under the chart's
// resources.limits.memory.
type memoryCgroup struct {
	dir   string // the cgroup's directory
	procs string // the file a process joins it by writing its pid
}

// newMemoryCgroup makes a child of this process's memory cgroup (cgroup
// v2, or v1's memory hierarchy) limited to limit bytes.
func newMemoryCgroup(name string, limit int64) (*memoryCgroup, error) {
	mount, rel, v2, err := ownMemoryCgroup()
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(mount, rel, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("making memory cgroup %s: %w (run as root, or with -controller-memory-limit 0)", dir, err)
	}
	file := "memory.limit_in_bytes"
	if v2 {
		file = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(strconv.FormatInt(limit, 10)), 0o644); err != nil {
		_ = os.Remove(dir)
		return nil, fmt.Errorf("limiting memory cgroup %s: %w", dir, err)
	}
	return &memoryCgroup{dir: dir, procs: filepath.Join(dir, "cgroup.procs")}, nil
}

// remove deletes the cgroup once its processes are gone.
func (c *memoryCgroup) remove() {
	if c != nil {
		_ = os.Remove(c.dir)
	}
}

// ownMemoryCgroup finds where this process's memory cgroup is: the
// hierarchy's mount point and the cgroup's path in it.
func ownMemoryCgroup() (mount, rel string, v2 bool, err error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "", "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	var unified string
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			if ctl == "memory" {
				return "/sys/fs/cgroup/memory", parts[2], false, nil
			}
		}
		if parts[0] == "0" && parts[1] == "" {
			unified = parts[2]
		}
	}
	if unified != "" {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
			return "/sys/fs/cgroup", unified, true, nil
		}
	}
	return "", "", false, errors.New("no memory cgroup found in /proc/self/cgroup")
}
