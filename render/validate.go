package render

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/distribution/reference"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RunConfig is a parsed, validated tau file together with what later steps
// need to report on it: its name, digest and where each field was written.
type RunConfig struct {
	Config
	// File is the path shown in errors, e.g. "tau/ray.yaml".
	File string
	// Digest is "sha256:<hex>" of the file's bytes.
	Digest string
	// Image is runtime.image as every container of the run gets it: fully
	// qualified, with its tag (":latest" when none is written) or digest,
	// e.g. docker.io/library/python:3.12 (see qualifyImage).
	Image string
	// Overrides are the run request's `--set` values, applied over the file.
	Overrides map[string]string

	pos   positions
	image reference.Named
}

// LoadConfig parses and validates one tau file. file names it in errors. On
// any problem it returns an ErrorList (or a FieldError for unreadable input)
// and no config.
func LoadConfig(file string, data []byte) (*RunConfig, error) {
	return LoadConfigWithOverrides(file, data, nil)
}

// LoadConfigWithOverrides is LoadConfig with a run request's overrides
// (dotted field paths to YAML values, as `tau run --set` writes them)
// applied over the file before validation: an override can change a value,
// never bypass a check. Errors about an overridden field name the override.
func LoadConfigWithOverrides(file string, data []byte, overrides map[string]string) (*RunConfig, error) {
	rc := &RunConfig{File: file, Digest: digestWith(data, overrides), Overrides: overrides}
	pos, err := decodeStrictWith(file, data, &rc.Config, overrides)
	if err != nil {
		return nil, err
	}
	rc.pos = pos
	if len(pos) == 0 {
		return nil, &FieldError{File: file, Line: 1, Col: 1, Msg: "file is empty; see `tau schema` for the fields of tau.yaml"}
	}
	v := &checker{file: file, pos: pos, overrides: overrides}
	rc.image = validateConfig(v, &rc.Config)
	if err := v.errs.orNil(); err != nil {
		return nil, err
	}
	rc.Image = rc.image.String()
	return rc, nil
}

// digestWith is "sha256:<hex>" of the file's bytes, and of the overrides
// in key order when there are any: the digest of what actually runs.
func digestWith(data []byte, overrides map[string]string) string {
	h := sha256.New()
	h.Write(data)
	for _, k := range slices.Sorted(maps.Keys(overrides)) {
		fmt.Fprintf(h, "\x00%s=%s", k, overrides[k])
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// checker collects located errors while validating decoded values.
type checker struct {
	file      string
	pos       positions
	overrides map[string]string
	errs      ErrorList
}

// at returns where path was written, or where its nearest written parent
// was, so that an error about a missing field points at its section.
func (c *checker) at(p string) pos {
	for {
		if at, ok := c.pos[p]; ok {
			return at
		}
		if p == "" {
			return pos{line: 1, col: 1}
		}
		i := max(strings.LastIndexAny(p, ".["), 0)
		p = p[:i]
	}
}

// ErrorAt is an error about the tau file's field path, located where the
// file (or a --set override) gave it, for checks made outside render, such as
// the cluster's quota.
func (rc *RunConfig) ErrorAt(path, format string, args ...any) error {
	c := &checker{file: rc.File, pos: rc.pos, overrides: rc.Overrides}
	for p := path; ; {
		if c.set(p) || c.overrides[p] != "" {
			path = p
			break
		}
		i := strings.LastIndex(p, ".")
		if i < 0 {
			break
		}
		p = p[:i] // the nearest field the file wrote
	}
	c.errorf(path, format, args...)
	return c.errs
}

func (c *checker) errorf(path, format string, args ...any) {
	if v, ok := c.overrides[path]; ok {
		c.errs = append(c.errs, &FieldError{File: fmt.Sprintf("%s (--set %s=%s)", c.file, path, v), Path: path, Msg: fmt.Sprintf(format, args...)})
		return
	}
	at := c.at(path)
	c.errs = append(c.errs, &FieldError{File: c.file, Line: at.line, Col: at.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// keyErrorf reports a problem with the name of a field or map key, pointing
// at the key rather than its value.
func (c *checker) keyErrorf(path, format string, args ...any) {
	at := c.at(path)
	if at.keyLine > 0 {
		at.line, at.col = at.keyLine, at.keyCol
	}
	c.errs = append(c.errs, &FieldError{File: c.file, Line: at.line, Col: at.col, Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (c *checker) set(path string) bool {
	_, ok := c.pos[path]
	return ok
}

var (
	envNameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	secretRefRE = regexp.MustCompile(`^([^:]+):([^:]+)$`)
)

// validateConfig checks a decoded tau file, filling in the inferred engine,
// and returns the fully qualified image reference (nil when it is invalid).
func validateConfig(c *checker, cfg *Config) (image reference.Named) {
	if !c.set("schema_version") {
		c.errorf("schema_version", "required; write `schema_version: 1` at the top")
	} else if cfg.SchemaVersion != 1 {
		c.errorf("schema_version", "unsupported version %d; this TauGrid reads version 1", cfg.SchemaVersion)
	}
	if cfg.Name != "" {
		c.dnsLabel("name", cfg.Name, 40)
	}
	validateEngine(c, cfg)
	c.relPath("entrypoint", cfg.Entrypoint, "the repository root", true)
	for i, a := range cfg.Args {
		if len(a) > 4096 {
			c.errorf(fmt.Sprintf("args[%d]", i), "argument is %d bytes; the limit is 4096", len(a))
		}
	}
	image = validateRuntime(c, &cfg.Runtime)
	validateCompute(c, cfg)
	validatePolicyRequest(c, &cfg.Policy)
	validateStorage(c, &cfg.Storage)
	validateResilience(c, &cfg.Resilience)
	if c.set("limits.timeout") && cfg.Limits.Timeout.Duration <= 0 {
		c.errorf("limits.timeout", "must be a positive duration, such as 12h")
	}
	if c.set("limits.max_queue_time") && cfg.Limits.MaxQueueTime.Duration <= 0 {
		c.errorf("limits.max_queue_time", "must be a positive duration, such as 2h")
	}
	if m := cfg.Limits.MaxPreemptions; m != nil && (*m < 0 || *m > 100) {
		c.errorf("limits.max_preemptions", "must be between 0 and 100, got %d", *m)
	}
	return image
}

// validateEngine infers the engine when it is omitted and rejects fields
// that belong to the other engine.
func validateEngine(c *checker, cfg *Config) {
	rayOnly := []string{"compute.workers", "compute.gpus_per_worker", "compute.head"}
	jobOnly := []string{"compute.gpus", "compute.nodes", "execution.launcher", "execution.processes_per_node"}
	if cfg.Engine == "" {
		cfg.Engine = EngineJob
		if slices.ContainsFunc(rayOnly, c.set) {
			cfg.Engine = EngineRayJob
		}
	}
	var foreign []string
	switch cfg.Engine {
	case EngineJob:
		foreign = rayOnly
	case EngineRayJob:
		foreign = jobOnly
	default:
		c.errorf("engine", "unknown engine %q; expected job or rayjob", cfg.Engine)
		return
	}
	for _, f := range foreign {
		if c.set(f) {
			c.errorf(f, "not allowed with engine %s", cfg.Engine)
		}
	}
}

func validateRuntime(c *checker, rt *Runtime) (image reference.Named) {
	if rt.Image == "" {
		c.errorf("runtime.image", "required; name the container image to run in")
	} else if ref, err := qualifyImage(rt.Image); err != nil {
		c.errorf("runtime.image", "invalid image reference %q: %v", rt.Image, err)
	} else {
		image = ref
	}
	for _, name := range slices.Sorted(maps.Keys(rt.Env)) {
		c.envName("runtime.env."+name, name)
	}
	for _, name := range slices.Sorted(maps.Keys(rt.EnvSecret)) {
		p := "runtime.env_secret." + name
		c.envName(p, name)
		if _, dup := rt.Env[name]; dup {
			c.errorf(p, "also set in runtime.env; set it in one place")
		}
		m := secretRefRE.FindStringSubmatch(rt.EnvSecret[name])
		switch {
		case m == nil:
			c.errorf(p, "invalid secret reference %q; expected \"secret-name:key\"", rt.EnvSecret[name])
		case len(validation.IsDNS1123Subdomain(m[1])) > 0:
			c.errorf(p, "invalid secret name %q: must be a lowercase DNS name", m[1])
		case len(validation.IsConfigMapKey(m[2])) > 0:
			c.errorf(p, "invalid secret key %q: may contain only letters, digits, '-', '_' and '.'", m[2])
		}
	}
	if rt.WorkingDir != "" && (!path.IsAbs(rt.WorkingDir) || path.Clean(rt.WorkingDir) != rt.WorkingDir) {
		c.errorf("runtime.working_dir", "must be a clean absolute path, such as /workspace; got %q", rt.WorkingDir)
	}
	return image
}

func validateCompute(c *checker, cfg *Config) {
	cp := &cfg.Compute
	c.intRange("compute.gpus", cp.GPUs, 0, 64)
	c.intRange("compute.gpus_per_worker", cp.GPUsPerWorker, 0, 64)
	c.quantity("compute.cpu", cp.CPU, resource.MustParse("1024"))
	c.quantity("compute.memory", cp.Memory, resource.MustParse("16Ti"))
	if cp.Head != nil {
		c.quantity("compute.head.cpu", cp.Head.CPU, resource.MustParse("1024"))
		c.quantity("compute.head.memory", cp.Head.Memory, resource.MustParse("16Ti"))
	}
	if c.set("compute.nodes") && (cp.Nodes < 1 || cp.Nodes > 512) {
		c.errorf("compute.nodes", "must be between 1 and 512, got %d", cp.Nodes)
	}
	if c.set("compute.workers") && (cp.Workers < 1 || cp.Workers > 1024) {
		c.errorf("compute.workers", "must be between 1 and 1024, got %d", cp.Workers)
	}
	validatePlacementFields(c, cfg)
	ex := &cfg.Execution
	if ex.Launcher != "" && ex.Launcher != LauncherPython && ex.Launcher != LauncherTorchrun {
		c.errorf("execution.launcher", "unknown launcher %q; expected python or torchrun", ex.Launcher)
	}
	if cp.Nodes > 1 && ex.Launcher != LauncherTorchrun {
		c.errorf("compute.nodes", "%d nodes need `execution.launcher: torchrun`", cp.Nodes)
	}
	if c.set("execution.processes_per_node") {
		if ex.ProcessesPerNode < 1 || ex.ProcessesPerNode > 64 {
			c.errorf("execution.processes_per_node", "must be between 1 and 64, got %d", ex.ProcessesPerNode)
		} else if ex.Launcher != LauncherTorchrun {
			c.errorf("execution.processes_per_node", "only used with `execution.launcher: torchrun`")
		}
	}
}

func validatePolicyRequest(c *checker, p *PolicyRequest) {
	for f, v := range map[string]string{"policy.profile": p.Profile, "policy.queue": p.Queue, "policy.priority": p.Priority} {
		if v != "" {
			c.dnsLabel(f, v, 63)
		}
	}
}

func validateStorage(c *checker, s *Storage) {
	if s.DataPVC != "" {
		if errs := validation.IsDNS1123Subdomain(s.DataPVC); len(errs) > 0 {
			c.errorf("storage.data_pvc", "invalid claim name %q: must be a lowercase DNS name", s.DataPVC)
		}
	}
	for f, v := range map[string]string{"storage.output": s.Output, "storage.checkpoint": s.Checkpoint} {
		if v == "" {
			continue
		}
		if c.relPath(f, v, "the data volume (/data)", false) && s.DataPVC == "" {
			c.errorf(f, "needs storage.data_pvc: outputs and checkpoints live on the data volume")
		}
	}
}

func validateResilience(c *checker, r *Resilience) {
	if r.MaxRetries < 0 || r.MaxRetries > 100 {
		c.errorf("resilience.max_retries", "must be between 0 and 100, got %d", r.MaxRetries)
	}
	for i, class := range r.RetryOn {
		if !slices.Contains(FailureClasses, class) {
			c.errorf(fmt.Sprintf("resilience.retry_on[%d]", i), "unknown failure class %q; expected one of %s", class, strings.Join(FailureClasses, ", "))
		}
	}
	b := r.Backoff
	for f, d := range map[string]Duration{"resilience.backoff.initial": b.Initial, "resilience.backoff.max": b.Max,
		"resilience.termination_grace": r.TerminationGrace} {
		if c.set(f) && d.Duration <= 0 {
			c.errorf(f, "must be a positive duration, such as 30s")
		}
	}
	if b.Initial.Duration > 0 && b.Max.Duration > 0 && b.Initial.Duration > b.Max.Duration {
		c.errorf("resilience.backoff.initial", "%s is longer than backoff.max (%s)", b.Initial, b.Max)
	}
}

func (c *checker) dnsLabel(path, v string, maxLen int) {
	if len(v) > maxLen {
		c.errorf(path, "%q is %d characters; the limit is %d", v, len(v), maxLen)
	} else if len(validation.IsDNS1123Label(v)) > 0 {
		c.errorf(path, "%q is not a DNS label: use lowercase letters, digits and '-', starting and ending with a letter or digit", v)
	}
}

func (c *checker) envName(path, name string) {
	switch {
	case !envNameRE.MatchString(name):
		c.keyErrorf(path, "invalid environment variable name %q: use letters, digits and '_', not starting with a digit", name)
	case strings.HasPrefix(name, "TAU_"):
		c.keyErrorf(path, "%q is reserved: TauGrid sets the TAU_* variables", name)
	case deviceSelecting(name):
		c.keyErrorf(path, "%q is reserved: it picks the node's devices, which the cluster assigns (set compute.gpus)", name)
	}
}

// deviceSelecting are the variables container runtimes and device plugins
// read to pick a node's accelerators: NVIDIA_VISIBLE_DEVICES=all in a pod
// run by the NVIDIA runtime would see every GPU of the node, not only those
// the scheduler gave it.
func deviceSelecting(name string) bool {
	switch name {
	case "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "AMD_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "HABANA_VISIBLE_DEVICES":
		return true
	}
	return strings.HasPrefix(name, "NVIDIA_")
}

// relPath checks a path inside the repository or the data volume: relative,
// clean, never climbing out with "..". It reports whether the path is valid.
func (c *checker) relPath(field, p, base string, required bool) bool {
	switch {
	case p == "":
		if required {
			c.errorf(field, "required; name the script to run, relative to the repository root")
		}
		return false
	case path.IsAbs(p):
		c.errorf(field, "%q is absolute; write a path relative to %s", p, base)
	case p == ".." || strings.HasPrefix(p, "../") || strings.Contains(p, "/../") || strings.HasSuffix(p, "/.."):
		c.errorf(field, "%q climbs out of its directory with \"..\"", p)
	case strings.ContainsAny(p, "\x00\\"):
		c.errorf(field, "%q contains a NUL byte or a backslash", p)
	default:
		return true
	}
	return false
}

func (c *checker) intRange(path string, v *int, lo, hi int) {
	if v != nil && (*v < lo || *v > hi) {
		c.errorf(path, "must be between %d and %d, got %d", lo, hi, *v)
	}
}

func (c *checker) quantity(path string, q *resource.Quantity, limit resource.Quantity) {
	if q == nil {
		return
	}
	if q.Sign() <= 0 {
		c.errorf(path, "must be positive, got %s", q)
	} else if q.Cmp(limit) > 0 {
		c.errorf(path, "%s is more than any node has (limit %s)", q, &limit)
	}
}
