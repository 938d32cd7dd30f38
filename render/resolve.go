package render

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"

	"github.com/distribution/reference"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Run is what the controller knows about one attempt of a run, beyond the
// tau file: its identity and provenance.
type Run struct {
	// Name is the TauRun's name; workloads are named <name>-<attempt>.
	Name string
	// Repository is the TauRepository's name.
	Repository string
	// Commit is the full SHA the run executes.
	Commit string
	// Target is the tau file's target: "default" for tau.yaml, else the
	// name of tau/<target>.yaml.
	Target string
	// Attempt counts from 1.
	Attempt int
	// PolicyCommit is the platform repo commit the policy was read at.
	PolicyCommit string
	// Resume asks an attempt to resume from the run's latest complete
	// checkpoint: its pods get TAU_RESUME_FROM, a link that the source init
	// container points at that checkpoint (see CheckpointMarker).
	Resume bool
	// RetryReason is the failure class that made this attempt a retry.
	RetryReason string
	// AvoidNodes are nodes the attempt must not run on: where an earlier
	// attempt hit a GPU fault or lost its node.
	AvoidNodes []string
	// Source is the archive the pod fetches the commit's tree from; nil
	// renders no fetch step (offline rendering).
	Source *SourceArchive
	// ProtectedSecrets are the Secrets of the run's namespace that hold the
	// repository's credentials (git, forge, webhook): no run may read them.
	ProtectedSecrets []string
	// SecretTypes are the types of the Secrets runtime.env_secret names,
	// as the controller read them ("" is Opaque); a Secret not in it is not
	// checked (offline rendering, or one that does not exist yet).
	SecretTypes map[string]string `json:",omitempty"`
}

// SourceArchive is a content-addressed archive of a commit's tree, served by
// the controller, that an init container fetches and verifies.
type SourceArchive struct {
	URL    string
	SHA256 string
	// Image runs the fetch; it holds no git credentials. The pods get it
	// fully qualified, as the run's own image (qualifyImage).
	Image string
	// Progress is where, beside the archive, the attempt's pods report how
	// far they are ($TAU_PROGRESS_URL); "": they get no way to report it.
	Progress string `json:",omitempty"`
}

// Plan is a run resolved under policy: every default filled, every limit
// checked. Rendering a Plan cannot fail.
type Plan struct {
	Config  *RunConfig
	Run     Run
	Tenant  *Tenant
	Profile *Profile

	Engine Engine
	// Image is the run's image as its containers get it: the fully
	// qualified reference the allow-list accepted (RunConfig.Image).
	Image         string
	Queue         string
	PriorityClass string

	GPUs             int // per pod (job) or per worker (rayjob)
	CPU, Memory      resource.Quantity
	Nodes            int // pods of a job
	Workers          int // Ray workers
	HeadCPU          resource.Quantity
	HeadMemory       resource.Quantity
	ProcessesPerNode int

	// Placement is where the run's GPU pods go on the profile's
	// topology; MIG is the MIG profile of the pod's one slice, when it asks
	// one instead of whole GPUs (GPUs is then 0).
	Placement      Placement
	MIG            string
	policyTopology *PlatformTopology

	Timeout time.Duration
	// TTL is how long an ended Job or RayJob object is kept for the record
	// (the platform's ttl_after_finished); its pods and Ray cluster are
	// gone at once.
	TTL time.Duration
	// TerminationGrace is the pods' time to flush a checkpoint after
	// SIGTERM.
	TerminationGrace time.Duration
	// MaxQueueTime is how long an attempt may wait in the queue; 0: no
	// limit. StartDeadline is how long an admitted attempt may take to
	// start running. MaxPreemptions, when set, caps preemptions.
	MaxQueueTime   time.Duration
	StartDeadline  time.Duration
	MaxPreemptions *int
	Retry          RetryPolicy
	PolicyDigest   string
	Security       Security

	// Egress is where the run's pods may connect: the stricter of the
	// tenant's and the profile's; EgressTo are the platform's named
	// destinations under cluster.
	Egress   Egress
	EgressTo []networkingv1.NetworkPolicyEgressRule
	// tenantNamespaces maps every tenant's namespace to the tenant: no
	// fence opens a way into one for the source server.
	tenantNamespaces map[string]string
}

// RetryPolicy is a run's resolved resilience: which failure classes are
// retried, how many times, and how long to wait before each retry.
type RetryPolicy struct {
	MaxRetries int
	On         []string
	Initial    time.Duration
	Max        time.Duration
}

// DefaultRetryOn are the classes retried when tau.yaml names none
// (taugridv1.DefaultRetryOn): the platform's faults, never the
// researcher's.
var DefaultRetryOn = classNames(taugridv1.DefaultRetryOn)

// Backoff is the wait before retry number n (1-based): doubling from
// Initial, capped at Max.
func (rp RetryPolicy) Backoff(n int) time.Duration {
	d := rp.Initial
	for i := 1; i < n && d < rp.Max; i++ {
		d *= 2
	}
	return min(d, rp.Max)
}

// defaultTerminationGrace is Kubernetes' own default.
const defaultTerminationGrace = 30 * time.Second

// Fallback sizes when neither the tau file nor the profile gives one.
var (
	fallbackCPU        = resource.MustParse("1")
	fallbackMemory     = resource.MustParse("4Gi")
	fallbackHeadCPU    = resource.MustParse("2")
	fallbackHeadMemory = resource.MustParse("8Gi")
)

// Resolve applies a tenant's policy to a validated tau file: picks the
// profile, queue and priority, fills defaults and refuses anything the policy
// does not allow. Errors point at the tau file's field.
func Resolve(rc *RunConfig, pol *Policy, tenant string, run Run) (*Plan, error) {
	t := pol.Tenant(tenant)
	if t == nil {
		return nil, fmt.Errorf("unknown tenant %q in the platform policy", tenant)
	}
	c := &checker{file: rc.File, pos: rc.pos, overrides: rc.Overrides}
	cfg := &rc.Config
	p := &Plan{Config: rc, Run: run, Tenant: t, Engine: cfg.Engine, Image: rc.Image,
		PolicyDigest: pol.Digest, Security: pol.Security, TTL: pol.Limits.TTLAfterFinished.Duration}
	p.Profile = resolveProfile(c, pol, t, cfg)
	p.Queue = resolveQueue(c, t, cfg.Policy.Queue)
	p.PriorityClass = resolvePriority(c, pol, t, cfg.Policy.Priority)
	checkSecrets(c, t, run, cfg.Runtime.EnvSecret)
	checkImage(c, &pol.Images, rc.image)
	checkStorage(c, t, &cfg.Storage)
	checkLimits(c, &pol.Limits, cfg, p)
	p.Retry = resolveRetry(&cfg.Resilience)
	if name := WorkloadName(run.Name, run.Attempt); p.Engine == EngineRayJob && len(name) > MaxRayJobName {
		c.errorf("engine", "the RayJob would be named %q, %d characters; KubeRay allows %d: use a shorter repository or target name", name, len(name), MaxRayJobName)
	}
	if p.Profile != nil {
		resolveCompute(c, p)
		resolvePlacement(c, pol, p)
		p.Egress, p.EgressTo = resolveEgress(t, p.Profile)
	}
	if err := c.errs.orNil(); err != nil {
		return nil, err
	}
	p.tenantNamespaces = make(map[string]string, len(pol.Tenants))
	for _, tn := range pol.Tenants {
		p.tenantNamespaces[tn.Namespace] = tn.Name
	}
	if err := p.AttachSource(run.Source); err != nil {
		return nil, err
	}
	return p, nil
}

func resolveProfile(c *checker, pol *Policy, t *Tenant, cfg *Config) *Profile {
	name := cfg.Policy.Profile
	if name == "" {
		name = t.DefaultProfile
	}
	pr := pol.profile(name)
	switch {
	case pr == nil:
		c.errorf("policy.profile", "unknown profile %q; tenant %s may use: %s", name, t.Name, strings.Join(tenantProfiles(pol, t), ", "))
		return nil
	case !t.mayUse(name):
		c.errorf("policy.profile", "profile %q is not available to tenant %s; it may use: %s", name, t.Name, strings.Join(tenantProfiles(pol, t), ", "))
		return nil
	case len(pr.Engines) > 0 && !slices.Contains(pr.Engines, cfg.Engine):
		c.errorf("engine", "profile %q does not allow engine %s", name, cfg.Engine)
		return nil
	}
	return pr
}

func tenantProfiles(pol *Policy, t *Tenant) []string {
	if len(t.Profiles) > 0 {
		return t.Profiles
	}
	names := make([]string, len(pol.Profiles))
	for i, p := range pol.Profiles {
		names[i] = p.Name
	}
	return names
}

func resolveQueue(c *checker, t *Tenant, queue string) string {
	if queue == "" {
		return t.Queues[0]
	}
	if !slices.Contains(t.Queues, queue) {
		c.errorf("policy.queue", "unknown queue %q; tenant %s submits to: %s", queue, t.Name, strings.Join(t.Queues, ", "))
	}
	return queue
}

func resolvePriority(c *checker, pol *Policy, t *Tenant, name string) string {
	for _, pr := range pol.Priorities {
		switch {
		case name == "" && pr.Default:
			return pr.Class
		case name != "" && pr.Name == name:
			if !pr.Default && !slices.Contains(t.Priorities, pr.Name) {
				c.errorf("policy.priority", "priority %q is not one tenant %s may use; it may use %s (tenants[].priorities in the platform repo)",
					name, t.Name, strings.Join(allowedPriorities(pol, t), ", "))
			}
			return pr.Class
		}
	}
	if name != "" {
		// Only the tenant's own: the names others may use are theirs.
		c.errorf("policy.priority", "unknown priority %q; expected one of: %s", name, strings.Join(allowedPriorities(pol, t), ", "))
	}
	return ""
}

// allowedPriorities are the priority names a tenant may ask for: the
// default and those the tenant lists.
func allowedPriorities(pol *Policy, t *Tenant) []string {
	var names []string
	for _, pr := range pol.Priorities {
		if pr.Default || slices.Contains(t.Priorities, pr.Name) {
			names = append(names, pr.Name)
		}
	}
	return names
}

// checkSecrets lets runtime.env_secret name only the Secrets the platform
// lets the tenant's runs read, and never the repository's own credentials
// (git, forge, webhook), whatever the tenant's list says. Only Opaque
// Secrets, unless the tenant's secret_types allow another type: a name the
// list allows may still be a ServiceAccount token (a credential to the
// API server as that account) or a registry or TLS key someone else made.
func checkSecrets(c *checker, t *Tenant, run Run, env map[string]string) {
	for _, name := range slices.Sorted(maps.Keys(env)) {
		secret, _, _ := strings.Cut(env[name], ":")
		field := "runtime.env_secret." + name
		typ, known := run.SecretTypes[secret]
		if typ == "" {
			typ = SecretTypeOpaque
		}
		switch {
		case slices.Contains(run.ProtectedSecrets, secret):
			c.errorf(field, "Secret %q holds this repository's credentials; runs may never read it", secret)
		case !slices.ContainsFunc(t.Secrets, func(glob string) bool { ok, _ := path.Match(glob, secret); return ok }):
			c.errorf(field, "Secret %q is not one tenant %s's runs may read (tenants[].secrets in the platform repo)", secret, t.Name)
		case known && typ != SecretTypeOpaque && !slices.Contains(t.SecretTypes, typ):
			c.errorf(field, "Secret %q is of type %s, not Opaque: runs read only Opaque Secrets unless the platform allows the type (tenants[].secret_types in the platform repo)", secret, typ)
		}
	}
}

// SecretTypeOpaque is the type of a Secret holding arbitrary data.
const SecretTypeOpaque = "Opaque"

func resolveRetry(r *Resilience) RetryPolicy {
	rp := RetryPolicy{MaxRetries: r.MaxRetries, On: r.RetryOn, Initial: r.Backoff.Initial.Duration, Max: r.Backoff.Max.Duration}
	if len(rp.On) == 0 {
		rp.On = DefaultRetryOn
	}
	if rp.Initial <= 0 {
		rp.Initial = 30 * time.Second
	}
	if rp.Max <= 0 {
		rp.Max = max(5*time.Minute, rp.Initial)
	}
	return rp
}

// checkImage lets a run use only an image the allow-list names, judged on
// the reference its pods get (qualifyImage), and only one pinned by a
// digest where the platform requires it.
func checkImage(c *checker, im *ImagePolicy, ref reference.Named) {
	switch {
	case ref == nil:
		c.errorf("runtime.image", "required; name the container image to run in")
	case !im.allows(ref):
		c.errorf("runtime.image", "image %q is not allowed; the platform allows images from: %s", ref.String(), strings.Join(im.Allow, ", "))
	case im.RequireDigest && !pinned(ref):
		c.errorf("runtime.image", "image %q must be pinned by digest (name@sha256:<64 hex digits>); the platform requires it", ref.String())
	}
}

func checkStorage(c *checker, t *Tenant, s *Storage) {
	if s.DataPVC != "" && !slices.Contains(t.PVCs, s.DataPVC) {
		c.errorf("storage.data_pvc", "claim %q is not one of tenant %s's volumes (%s)", s.DataPVC, t.Name, strings.Join(t.PVCs, ", "))
	}
}

func checkLimits(c *checker, l *PolicyLimits, cfg *Config, p *Plan) {
	p.Timeout = l.DefaultRunTime.Duration
	if t := cfg.Limits.Timeout.Duration; t > 0 {
		p.Timeout = t
		if t > l.MaxRunTime.Duration {
			c.errorf("limits.timeout", "%s is longer than the platform's maximum run time (%s)", cfg.Limits.Timeout, l.MaxRunTime)
		}
	}
	p.StartDeadline, p.MaxPreemptions = l.StartDeadline.Duration, cfg.Limits.MaxPreemptions
	p.MaxQueueTime = l.MaxQueueTime.Duration
	if q := cfg.Limits.MaxQueueTime.Duration; q > 0 {
		p.MaxQueueTime = q
		if l.MaxQueueTime.Duration > 0 && q > l.MaxQueueTime.Duration {
			c.errorf("limits.max_queue_time", "%s is longer than the platform's maximum queue time (%s)", cfg.Limits.MaxQueueTime, l.MaxQueueTime)
		}
	}
	p.TerminationGrace = defaultTerminationGrace
	if g := cfg.Resilience.TerminationGrace; g.Duration > 0 {
		p.TerminationGrace = g.Duration
		if g.Duration > l.MaxTerminationGrace.Duration {
			c.errorf("resilience.termination_grace", "%s is longer than the platform's maximum (%s)", g, l.MaxTerminationGrace)
		}
	}
	if r := cfg.Resilience.MaxRetries; r > l.MaxRetries {
		c.errorf("resilience.max_retries", "%d retries exceed the platform's limit of %d", r, l.MaxRetries)
	}
	size := 0
	for k, v := range cfg.Runtime.Env {
		size += len(k) + len(v)
	}
	if size > l.MaxEnvBytes {
		c.errorf("runtime.env", "environment is %d bytes; the platform's limit is %d", size, l.MaxEnvBytes)
	}
}

// resolveCompute fills sizes from the profile and checks them against its
// caps.
func resolveCompute(c *checker, p *Plan) {
	cp, pr := &p.Config.Compute, p.Profile
	p.CPU = quantityOr(cp.CPU, pr.Defaults.CPU, fallbackCPU)
	p.Memory = quantityOr(cp.Memory, pr.Defaults.Memory, fallbackMemory)
	switch p.Engine {
	case EngineJob:
		p.GPUs = intOr(cp.GPUs, pr.Defaults.GPUs)
		p.Nodes = max(cp.Nodes, 1)
		p.ProcessesPerNode = p.Config.Execution.ProcessesPerNode
		if p.ProcessesPerNode == 0 {
			p.ProcessesPerNode = max(p.GPUs, 1)
		}
		checkCaps(c, pr, "compute.gpus", p.GPUs, "compute.nodes", p.Nodes)
	case EngineRayJob:
		p.GPUs = intOr(cp.GPUsPerWorker, pr.Defaults.GPUs)
		p.Workers = max(cp.Workers, 1)
		var head HeadResources
		if cp.Head != nil {
			head = *cp.Head
		}
		p.HeadCPU = quantityOr(head.CPU, pr.Defaults.HeadCPU, fallbackHeadCPU)
		p.HeadMemory = quantityOr(head.Memory, pr.Defaults.HeadMemory, fallbackHeadMemory)
		checkCaps(c, pr, "compute.gpus_per_worker", p.GPUs, "compute.workers", p.Workers)
	}
}

func checkCaps(c *checker, pr *Profile, gpuField string, gpus int, podField string, pods int) {
	if pods > pr.MaxNodes {
		c.errorf(podField, "%d exceeds profile %q's limit of %d", pods, pr.Name, pr.MaxNodes)
		return
	}
	if total := gpus * pods; total > pr.MaxGPUs {
		c.errorf(gpuField, "%d GPUs in all exceed profile %q's limit of %d", total, pr.Name, pr.MaxGPUs)
	}
}

// quantityOr returns the first of the tau file's and the profile's values
// that is set, else the fallback.
func quantityOr(fromConfig, fromProfile *resource.Quantity, fallback resource.Quantity) resource.Quantity {
	switch {
	case fromConfig != nil:
		return fromConfig.DeepCopy()
	case fromProfile != nil:
		return fromProfile.DeepCopy()
	}
	return fallback.DeepCopy()
}

func intOr(v *int, def int) int {
	if v != nil {
		return *v
	}
	return def
}
