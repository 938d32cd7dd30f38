package main

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// components are the processes whose CPU the harness reports, by the
// command name the kernel keeps (15 characters at most): on a machine
// running only the harness, these are the cluster, the controller and the
// harness itself.
var components = map[string]string{
	"kube-apiserver":  "kube-apiserver",
	"etcd":            "etcd",
	"kueue":           "kueue",
	"kube-controller": "kube-controller-manager",
	"kube-scheduler":  "kube-scheduler",
	"kwok":            "kwok",
	"tau-controller":  "tau-controller",
	"scale":           "the harness",
}

// cpuTimes is each component's CPU time (utime+stime) at one moment.
type cpuTimes struct {
	at  time.Time
	cpu map[string]time.Duration
}

// readCPU reads every process's stat under proc and sums the CPU time of
// the components by name; ticks is the kernel's clock ticks a second.
func readCPU(proc string, ticks float64) cpuTimes {
	c := cpuTimes{at: time.Now(), cpu: map[string]time.Duration{}}
	stats, _ := filepath.Glob(filepath.Join(proc, "[0-9]*", "stat"))
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // gone since the glob
		}
		name, cpu, ok := parseStat(string(b), ticks)
		if comp, known := components[name]; ok && known {
			c.cpu[comp] += cpu
		}
	}
	return c
}

// parseStat reads a /proc/<pid>/stat line: the command name in
// parentheses, then utime and stime, the 14th and 15th fields.
func parseStat(line string, ticks float64) (string, time.Duration, bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open || end+2 > len(line) {
		return "", 0, false
	}
	fields := strings.Fields(line[end+2:])
	if len(fields) < 13 {
		return "", 0, false
	}
	ut, err1 := strconv.ParseFloat(fields[11], 64)
	st, err2 := strconv.ParseFloat(fields[12], 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return line[open+1 : end], time.Duration((ut + st) / ticks * float64(time.Second)), true
}

// cores is the share of a core each component used from a to b, the
// largest first, for instance "kube-apiserver 1.21, tau-controller 0.25".
func cores(a, b cpuTimes) string {
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return "-"
	}
	type use struct {
		name  string
		cores float64
	}
	var us []use
	for name, t := range b.cpu {
		us = append(us, use{name, (t - a.cpu[name]).Seconds() / secs})
	}
	slices.SortFunc(us, func(x, y use) int { return cmp.Or(cmp.Compare(y.cores, x.cores), strings.Compare(x.name, y.name)) })
	parts := make([]string, 0, len(us))
	for _, u := range us {
		parts = append(parts, fmt.Sprintf("%s %.2f", u.name, u.cores))
	}
	return strings.Join(parts, ", ")
}
