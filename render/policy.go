package render

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Policy is the platform team's rules, read from a directory of the platform
// repo: who may run what, where, and how much. Resolution against it is fail
// closed: whatever it does not allow is refused.
type Policy struct {
	Tenants    []Tenant     `json:"tenants"`
	Profiles   []Profile    `json:"profiles"`
	Images     ImagePolicy  `json:"images"`
	Priorities []Priority   `json:"priorities,omitempty"`
	Limits     PolicyLimits `json:"limits"`
	Security   Security     `json:"security"`
	// Clusters are the MultiKueue worker clusters the platform dispatches
	// to; none: one cluster.
	Clusters []WorkerCluster `json:"clusters,omitempty"`

	// Topologies are the Kueue Topologies declared under kueue/, by name,
	// with the ResourceFlavors that place pods by each.
	Topologies map[string]*PlatformTopology `json:"-"`

	// Digest is "sha256:<hex>" over the policy files read, in name order,
	// and the kueue/ files that declare a Topology.
	Digest string `json:"-"`
}

// Tenant is a team: its namespace, the repositories it may register and
// what its runs may use.
type Tenant struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Repositories are glob patterns (path.Match) of git URLs the tenant may register.
	Repositories []string `json:"repositories"`
	// Queues are the tenant's Kueue LocalQueues; the first is the default.
	Queues []string `json:"queues"`
	// DefaultProfile is used when tau.yaml names none.
	DefaultProfile string `json:"default_profile"`
	// Profiles the tenant may use; empty means every profile.
	Profiles []string `json:"profiles,omitempty"`
	// PVCs the tenant's runs may mount as storage.data_pvc.
	PVCs []string `json:"pvcs,omitempty"`
	// ServiceAccount runs the tenant's pods; empty means the namespace default.
	ServiceAccount string `json:"service_account,omitempty"`
	// Secrets the tenant's runs may read through runtime.env_secret: names
	// or path.Match globs of Secrets in its namespace. Empty means none.
	Secrets []string `json:"secrets,omitempty"`
	// SecretTypes are the Secret types besides Opaque those Secrets may
	// have (such as kubernetes.io/basic-auth). Empty: Opaque only, so no
	// run reads a ServiceAccount token, a registry credential or a TLS key
	// that happens to match a name in Secrets.
	SecretTypes []string `json:"secret_types,omitempty"`
	// Priorities the tenant's runs may ask for, by name; empty means only
	// the policy's default priority.
	Priorities []string `json:"priorities,omitempty"`
	// MIGProfiles narrows the MIG profiles (compute.mig) the tenant's runs
	// may use to these; empty means whatever each compute profile offers.
	MIGProfiles []string `json:"mig_profiles,omitempty"`
	// Egress is where the tenant's runs may connect (deny, cluster or
	// open; open when unset); the stricter of the tenant's and the
	// profile's applies. EgressTo are the destinations cluster adds.
	Egress   Egress                                 `json:"egress,omitempty"`
	EgressTo []networkingv1.NetworkPolicyEgressRule `json:"egress_to,omitempty"`
}

// Profile is a class of machine a run can ask for.
type Profile struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// GPUResource is the extended resource name; defaults to nvidia.com/gpu.
	GPUResource  corev1.ResourceName `json:"gpu_resource,omitempty"`
	NodeSelector map[string]string   `json:"node_selector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
	Affinity     *corev1.Affinity    `json:"affinity,omitempty"`
	// PodAnnotations go on every pod of the profile's runs, for the
	// platform's own tooling (autoscalers, sidecar injection, simulators).
	PodAnnotations map[string]string `json:"pod_annotations,omitempty"`
	// MaxGPUs caps the GPUs of one run, all pods together.
	MaxGPUs int `json:"max_gpus"`
	// MaxNodes caps the pods (nodes or Ray workers) of one run.
	MaxNodes int `json:"max_nodes"`
	// Engines the profile allows; empty means both.
	Engines []Engine `json:"engines,omitempty"`
	// AllowIngressFrom are the peers, besides the run's own pods, that may
	// connect to the profile's pods (a metrics scraper's namespace, say);
	// every run's pods are fenced by a NetworkPolicy.
	AllowIngressFrom []networkingv1.NetworkPolicyPeer `json:"allow_ingress_from,omitempty"`
	Defaults         ProfileDefaults                  `json:"defaults"`
	// Topology is the Kueue Topology (declared under kueue/) by which the
	// profile's ResourceFlavor places pods; it names the levels runs may
	// ask in compute.placement. Empty: the profile has no topology.
	Topology string `json:"topology,omitempty"`
	// MultiNodePlacement is the placement every multi-node run of the
	// profile gets, such as same-block; a run may ask a narrower level.
	MultiNodePlacement string `json:"multi_node_placement,omitempty"`
	// MIGProfiles are the MIG profiles (such as 1g.18gb) the profile's
	// nodes offer, as nvidia.com/mig-<profile> resources; a run asks one
	// with compute.mig. Empty: no MIG.
	MIGProfiles []string `json:"mig_profiles,omitempty"`
	// Egress is where the profile's runs may connect (deny, cluster or
	// open; open when unset); the stricter of the tenant's and the
	// profile's applies. EgressTo are the destinations cluster adds.
	Egress   Egress                                 `json:"egress,omitempty"`
	EgressTo []networkingv1.NetworkPolicyEgressRule `json:"egress_to,omitempty"`
}

// ProfileDefaults fill what a tau file leaves out.
type ProfileDefaults struct {
	GPUs       int                `json:"gpus"`
	CPU        *resource.Quantity `json:"cpu,omitempty"`
	Memory     *resource.Quantity `json:"memory,omitempty"`
	HeadCPU    *resource.Quantity `json:"head_cpu,omitempty"`
	HeadMemory *resource.Quantity `json:"head_memory,omitempty"`
}

// ImagePolicy is the image allow-list.
type ImagePolicy struct {
	// Allow lists registries and repositories, fully qualified and
	// normalised, such as "ghcr.io/taugrid" or "docker.io/library/python";
	// each allows images under it at a path boundary (see allows).
	Allow []string `json:"allow"`
	// RequireDigest refuses images not pinned by a digest (name@sha256:...).
	RequireDigest bool `json:"require_digest,omitempty"`
}

// Priority maps a name researchers use to a Kueue WorkloadPriorityClass.
type Priority struct {
	Name    string `json:"name"`
	Class   string `json:"class"`
	Default bool   `json:"default,omitempty"`
}

// PolicyLimits bound every run.
type PolicyLimits struct {
	MaxRunTime     Duration `json:"max_run_time,omitzero"`
	DefaultRunTime Duration `json:"default_run_time,omitzero"`
	MaxRetries     int      `json:"max_retries,omitempty"`
	MaxEnvBytes    int      `json:"max_env_bytes,omitempty"`
	// TTLAfterFinished is how long an ended attempt's Job or RayJob object
	// is kept for the record, holding no pods: an ended attempt's pods and
	// Ray cluster are deleted at once, whatever this says. 24h by default.
	TTLAfterFinished Duration `json:"ttl_after_finished,omitzero"`
	// MaxTerminationGrace caps resilience.termination_grace.
	MaxTerminationGrace Duration `json:"max_termination_grace,omitzero"`
	// MaxQueueTime caps limits.max_queue_time, and applies to runs that set
	// none; 0: no cap.
	MaxQueueTime Duration `json:"max_queue_time,omitzero"`
	// StartDeadline fails an admitted attempt whose pods are not running
	// after this long (an image that never pulls, pods that cannot be
	// scheduled), releasing its quota; 10m by default.
	StartDeadline Duration `json:"start_deadline,omitzero"`
	// IdleGPUPercent (a whole percent), IdleGPUTime and IdlePolicy catch
	// idle GPUs: an attempt whose GPUs' mean utilisation stays under IdleGPUPercent for
	// IdleGPUTime is warned about (warn) or ended with the failure class
	// IdleGPUs (stop). Setting any of them turns it on, the others then
	// default to 5, 30m and warn; setting none leaves it off.
	IdleGPUPercent *int       `json:"idle_gpu_percent,omitempty"`
	IdleGPUTime    Duration   `json:"idle_gpu_time,omitzero"`
	IdlePolicy     IdleAction `json:"idle_policy,omitempty"`
}

// IdleAction is what happens to an attempt whose GPUs are idle.
type IdleAction string

// The idle policies.
const (
	IdleWarn IdleAction = "warn" // a warning on the run, its commit and an Event
	IdleStop IdleAction = "stop" // the warning, and the attempt ends (IdleGPUs)
)

// IdleRule is the platform's idle-GPU rule in force.
type IdleRule struct {
	// BelowPercent is the mean utilisation under which GPUs are idle.
	BelowPercent float64
	// For is how long they must stay so.
	For    time.Duration
	Action IdleAction
}

// IdleGPUs is the idle-GPU rule, nil when the platform sets none.
func (l *PolicyLimits) IdleGPUs() *IdleRule {
	if l.IdleGPUPercent == nil && l.IdleGPUTime.Duration == 0 && l.IdlePolicy == "" {
		return nil
	}
	r := &IdleRule{BelowPercent: defaultIdlePercent, For: defaultIdleTime, Action: IdleWarn}
	if l.IdleGPUPercent != nil {
		r.BelowPercent = float64(*l.IdleGPUPercent)
	}
	if l.IdleGPUTime.Duration != 0 {
		r.For = l.IdleGPUTime.Duration
	}
	if l.IdlePolicy != "" {
		r.Action = l.IdlePolicy
	}
	return r
}

// Security is the pod security every run gets.
type Security struct {
	RunAsUser  int64 `json:"run_as_user,omitempty"`
	RunAsGroup int64 `json:"run_as_group,omitempty"`
	FSGroup    int64 `json:"fs_group,omitempty"`
}

// Policy defaults, used when the platform repo leaves a limit out.
const (
	defaultMaxRunTime     = 7 * 24 * time.Hour
	defaultRunTime        = 24 * time.Hour
	defaultMaxEnvBytes    = 128 << 10
	defaultTTLAfterFinish = 24 * time.Hour
	defaultMaxGrace       = 10 * time.Minute
	defaultStartDeadline  = 10 * time.Minute
	defaultIdlePercent    = 5
	defaultIdleTime       = 30 * time.Minute
	defaultUID            = 65532
	defaultGPUResource    = "nvidia.com/gpu"
)

// policyFiles are the files of a policy directory; the required ones must
// exist. Everything else in the directory (such as kueue/) is not the
// renderer's business.
var policyFiles = []struct {
	name     string
	required bool
}{
	{"tenants.yaml", true},
	{"profiles.yaml", true},
	{"images.yaml", true},
	{"priorities.yaml", false},
	{"limits.yaml", false},
	{"security.yaml", false},
	{ClustersFile, false},
}

// LoadPolicy reads and validates the policy files at the root of fsys. Errors
// name the file, line and field.
func LoadPolicy(fsys fs.FS) (*Policy, error) {
	p := &Policy{}
	targets := map[string]any{
		"tenants.yaml": &struct {
			Tenants *[]Tenant `json:"tenants"`
		}{&p.Tenants},
		"profiles.yaml": &struct {
			Profiles *[]Profile `json:"profiles"`
		}{&p.Profiles},
		"images.yaml": &p.Images,
		"priorities.yaml": &struct {
			Priorities *[]Priority `json:"priorities"`
		}{&p.Priorities},
		"limits.yaml":   &p.Limits,
		"security.yaml": &p.Security,
		ClustersFile: &struct {
			Clusters *[]WorkerCluster `json:"clusters"`
		}{&p.Clusters},
	}
	h := sha256.New()
	var errs ErrorList
	checkers := map[string]*checker{}
	for _, f := range policyFiles {
		data, err := fs.ReadFile(fsys, f.name)
		if errors.Is(err, fs.ErrNotExist) && !f.required {
			checkers[f.name] = &checker{file: f.name, pos: positions{}}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading policy file %s: %w", f.name, err)
		}
		fmt.Fprintf(h, "%s\x00%d\x00", f.name, len(data))
		h.Write(data)
		pos, err := decodeStrict(f.name, data, targets[f.name])
		if err != nil {
			errs = append(errs, Errors(err)...)
			continue
		}
		checkers[f.name] = &checker{file: f.name, pos: pos}
	}
	topologies, digested, terrs := loadTopologies(fsys)
	errs = append(errs, terrs...)
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	for _, data := range digested {
		fmt.Fprintf(h, "%s\x00%d\x00", kueueDir, len(data))
		h.Write(data)
	}
	p.Topologies = topologies
	p.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	p.applyDefaults()
	if err := p.validate(checkers); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Policy) applyDefaults() {
	l := &p.Limits
	if l.MaxRunTime.Duration == 0 {
		l.MaxRunTime.Duration = defaultMaxRunTime
	}
	if l.DefaultRunTime.Duration == 0 {
		l.DefaultRunTime.Duration = min(defaultRunTime, l.MaxRunTime.Duration)
	}
	if l.MaxEnvBytes == 0 {
		l.MaxEnvBytes = defaultMaxEnvBytes
	}
	if l.TTLAfterFinished.Duration == 0 {
		l.TTLAfterFinished.Duration = defaultTTLAfterFinish
	}
	if l.MaxTerminationGrace.Duration == 0 {
		l.MaxTerminationGrace.Duration = defaultMaxGrace
	}
	if l.StartDeadline.Duration == 0 {
		l.StartDeadline.Duration = defaultStartDeadline
	}
	s := &p.Security
	if s.RunAsUser == 0 {
		s.RunAsUser = defaultUID
	}
	if s.RunAsGroup == 0 {
		s.RunAsGroup = s.RunAsUser
	}
	if s.FSGroup == 0 {
		s.FSGroup = s.RunAsGroup
	}
	for i := range p.Profiles {
		if p.Profiles[i].GPUResource == "" {
			p.Profiles[i].GPUResource = defaultGPUResource
		}
	}
}

// validate checks each file and the references between them.
func (p *Policy) validate(cs map[string]*checker) error {
	validateProfiles(cs["profiles.yaml"], p.Profiles)
	validateTenants(cs["tenants.yaml"], p)
	validateImages(cs["images.yaml"], &p.Images)
	validatePriorities(cs["priorities.yaml"], p.Priorities)
	validateLimits(cs["limits.yaml"], &p.Limits)
	validateClusters(cs[ClustersFile], p.Clusters)
	validateProfilePlacement(cs["profiles.yaml"], p)
	validateTenantMIG(cs["tenants.yaml"], p)
	for i, t := range p.Tenants {
		validateEgress(cs["tenants.yaml"], fmt.Sprintf("tenants[%d]", i), t.Egress, t.EgressTo, p.Tenants)
	}
	for i, pr := range p.Profiles {
		validateEgress(cs["profiles.yaml"], fmt.Sprintf("profiles[%d]", i), pr.Egress, pr.EgressTo, p.Tenants)
	}
	var errs ErrorList
	for _, f := range policyFiles {
		errs = append(errs, cs[f.name].errs...)
	}
	return errs.orNil()
}

func validateProfiles(c *checker, profiles []Profile) {
	if len(profiles) == 0 {
		c.errorf("profiles", "no profiles: declare at least one compute profile")
	}
	seen := map[string]bool{}
	for i, pr := range profiles {
		at := fmt.Sprintf("profiles[%d]", i)
		c.uniqueLabel(at+".name", pr.Name, seen)
		if errs := validation.IsQualifiedName(string(pr.GPUResource)); len(errs) > 0 {
			c.errorf(at+".gpu_resource", "invalid resource name %q", pr.GPUResource)
		}
		if pr.MaxGPUs < 0 {
			c.errorf(at+".max_gpus", "must be at least 0, got %d", pr.MaxGPUs)
		}
		if pr.MaxNodes < 1 {
			c.errorf(at+".max_nodes", "must be at least 1, got %d", pr.MaxNodes)
		}
		if pr.MaxGPUs >= 0 && (pr.Defaults.GPUs < 0 || pr.Defaults.GPUs > pr.MaxGPUs) {
			c.errorf(at+".defaults.gpus", "must be between 0 and max_gpus (%d), got %d", pr.MaxGPUs, pr.Defaults.GPUs)
		}
		for _, k := range slices.Sorted(maps.Keys(pr.PodAnnotations)) {
			if errs := validation.IsQualifiedName(k); len(errs) > 0 {
				c.errorf(at+".pod_annotations", "invalid annotation key %q: %s", k, strings.Join(errs, "; "))
			} else if strings.HasPrefix(k, "taugrid.dev/") || strings.HasPrefix(k, "kueue.x-k8s.io/") {
				c.errorf(at+".pod_annotations", "annotation %q is reserved for TauGrid and Kueue", k)
			}
		}
		for j, e := range pr.Engines {
			if e != EngineJob && e != EngineRayJob {
				c.errorf(fmt.Sprintf("%s.engines[%d]", at, j), "unknown engine %q; expected job or rayjob", e)
			}
		}
		d := pr.Defaults
		for f, q := range map[string]*resource.Quantity{"cpu": d.CPU, "memory": d.Memory, "head_cpu": d.HeadCPU, "head_memory": d.HeadMemory} {
			if q != nil && q.Sign() <= 0 {
				c.errorf(at+".defaults."+f, "must be positive, got %s", q)
			}
		}
	}
}

func validateTenants(c *checker, p *Policy) {
	if len(p.Tenants) == 0 {
		c.errorf("tenants", "no tenants: declare at least one")
	}
	names, namespaces := map[string]bool{}, map[string]bool{}
	for i, t := range p.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		c.uniqueLabel(at+".name", t.Name, names)
		c.uniqueLabel(at+".namespace", t.Namespace, namespaces)
		if len(t.Queues) == 0 {
			c.errorf(at+".queues", "required: the tenant's Kueue LocalQueue")
		}
		for j, q := range t.Queues {
			c.dnsLabel(fmt.Sprintf("%s.queues[%d]", at, j), q, 63)
		}
		for j, r := range t.Repositories {
			if _, err := path.Match(r, ""); err != nil {
				c.errorf(fmt.Sprintf("%s.repositories[%d]", at, j), "invalid pattern %q: %v", r, err)
			}
		}
		if t.DefaultProfile == "" {
			c.errorf(at+".default_profile", "required")
		} else if p.profile(t.DefaultProfile) == nil {
			c.errorf(at+".default_profile", "unknown profile %q", t.DefaultProfile)
		} else if !t.mayUse(t.DefaultProfile) {
			c.errorf(at+".default_profile", "%q is not in the tenant's profiles", t.DefaultProfile)
		}
		for j, name := range t.Profiles {
			if p.profile(name) == nil {
				c.errorf(fmt.Sprintf("%s.profiles[%d]", at, j), "unknown profile %q", name)
			}
		}
		for j, typ := range t.SecretTypes {
			if !secretType.MatchString(typ) {
				c.errorf(fmt.Sprintf("%s.secret_types[%d]", at, j), "%q is not a Secret type; expected one such as kubernetes.io/basic-auth", typ)
			}
		}
	}
}

// secretType is the form of a Secret's type: a name, or a domain and a
// name.
var secretType = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?(/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)

func validateImages(c *checker, im *ImagePolicy) {
	if len(im.Allow) == 0 {
		c.errorf("allow", "empty: no image could run; list the registry prefixes runs may use")
	}
	for i, a := range im.Allow {
		if problem := allowEntryProblem(a); problem != "" {
			c.errorf(fmt.Sprintf("allow[%d]", i), "%s", problem)
		}
	}
}

func validatePriorities(c *checker, ps []Priority) {
	seen := map[string]bool{}
	defaults := 0
	for i, pr := range ps {
		at := fmt.Sprintf("priorities[%d]", i)
		c.uniqueLabel(at+".name", pr.Name, seen)
		if len(validation.IsDNS1123Subdomain(pr.Class)) > 0 {
			c.errorf(at+".class", "invalid WorkloadPriorityClass name %q", pr.Class)
		}
		if pr.Default {
			if defaults++; defaults > 1 {
				c.errorf(at+".default", "more than one default priority")
			}
		}
	}
}

func validateLimits(c *checker, l *PolicyLimits) {
	if l.MaxRetries < 0 {
		c.errorf("max_retries", "must be at least 0, got %d", l.MaxRetries)
	}
	if l.MaxEnvBytes < 0 {
		c.errorf("max_env_bytes", "must be at least 0, got %d", l.MaxEnvBytes)
	}
	for f, d := range map[string]Duration{"max_run_time": l.MaxRunTime, "default_run_time": l.DefaultRunTime, "ttl_after_finished": l.TTLAfterFinished,
		"max_termination_grace": l.MaxTerminationGrace, "start_deadline": l.StartDeadline} {
		if d.Duration <= 0 {
			c.errorf(f, "must be a positive duration")
		}
	}
	if l.MaxQueueTime.Duration < 0 {
		c.errorf("max_queue_time", "must be a positive duration, or absent for no cap")
	}
	if l.DefaultRunTime.Duration > l.MaxRunTime.Duration {
		c.errorf("default_run_time", "%s is longer than max_run_time (%s)", l.DefaultRunTime, l.MaxRunTime)
	}
	validateIdle(c, l)
}

// validateIdle checks the idle-GPU keys. Utilisation is read once a minute,
// so a shorter idle time could not be told apart.
func validateIdle(c *checker, l *PolicyLimits) {
	if p := l.IdleGPUPercent; p != nil && (*p <= 0 || *p > 100) {
		c.errorf("idle_gpu_percent", "must be more than 0 and at most 100, got %d", *p)
	}
	if d := l.IdleGPUTime.Duration; d < 0 || (d > 0 && d < time.Minute) {
		c.errorf("idle_gpu_time", "must be a duration of at least 1m (utilisation is read once a minute), got %s", l.IdleGPUTime)
	}
	if a := l.IdlePolicy; a != "" && a != IdleWarn && a != IdleStop {
		c.errorf("idle_policy", "unknown policy %q; expected warn or stop", a)
	}
}

func (c *checker) uniqueLabel(path, name string, seen map[string]bool) {
	switch {
	case name == "":
		c.errorf(path, "required")
	case seen[name]:
		c.errorf(path, "%q is declared twice", name)
	default:
		c.dnsLabel(path, name, 63)
	}
	seen[name] = true
}

// Tenant returns the tenant with the given name, or nil.
func (p *Policy) Tenant(name string) *Tenant {
	for i := range p.Tenants {
		if p.Tenants[i].Name == name {
			return &p.Tenants[i]
		}
	}
	return nil
}

// TenantForNamespace returns the tenant that owns a namespace, or nil.
func (p *Policy) TenantForNamespace(ns string) *Tenant {
	for i := range p.Tenants {
		if p.Tenants[i].Namespace == ns {
			return &p.Tenants[i]
		}
	}
	return nil
}

func (p *Policy) profile(name string) *Profile {
	for i := range p.Profiles {
		if p.Profiles[i].Name == name {
			return &p.Profiles[i]
		}
	}
	return nil
}

func (t *Tenant) mayUse(profile string) bool {
	return len(t.Profiles) == 0 || slices.Contains(t.Profiles, profile)
}

// AllowsRepository reports whether the tenant may register a git URL. The
// URL and each pattern are compared in their canonical form
// (CanonicalRepoURL), so no encoding, dot segment or letter case takes a
// URL out of the part of the forge a pattern names; a URL that does not
// parse is refused.
func (t *Tenant) AllowsRepository(url string) bool {
	u, ok := CanonicalRepoURL(url)
	if !ok {
		return false
	}
	for _, pattern := range t.Repositories {
		p, ok := CanonicalRepoURL(pattern)
		if !ok {
			continue
		}
		if m, _ := path.Match(p, u); m {
			return true
		}
	}
	return false
}
