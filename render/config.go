package render

import (
	"fmt"
	"time"

	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Engine says what TauGrid submits for a run.
type Engine string

// The engines a run can use.
const (
	EngineJob    Engine = "job"    // a batch/v1 Job: one pod, or an Indexed Job for multi-node torchrun
	EngineRayJob Engine = "rayjob" // a ray.io/v1 RayJob: a head and a GPU worker group
)

// Launcher says how a Job starts the entrypoint.
type Launcher string

// The launchers a Job can use.
const (
	LauncherPython   Launcher = "python"
	LauncherTorchrun Launcher = "torchrun"
)

// Config is a tau.yaml (or tau/<target>.yaml), schema version 1: what a
// researcher asks to run. The platform policy decides where and how much.
type Config struct {
	// SchemaVersion must be 1.
	SchemaVersion int `json:"schema_version" jsonschema:"required,enum=1"`
	// Name is a short DNS label naming the run; defaults to the target.
	Name string `json:"name,omitempty" jsonschema:"maxLength=40,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Engine is job or rayjob; inferred from compute when omitted.
	Engine Engine `json:"engine,omitempty" jsonschema:"enum=job,enum=rayjob"`
	// Entrypoint is the script to run, relative to the repository root.
	Entrypoint string `json:"entrypoint" jsonschema:"required,minLength=1,maxLength=1024"`
	// Args are passed to the entrypoint unchanged.
	Args []string `json:"args,omitempty" jsonschema:"maxItems=256"`

	Runtime    Runtime       `json:"runtime" jsonschema:"required"`
	Compute    Compute       `json:"compute,omitzero"`
	Execution  Execution     `json:"execution,omitzero"`
	Policy     PolicyRequest `json:"policy,omitzero"`
	Storage    Storage       `json:"storage,omitzero"`
	Resilience Resilience    `json:"resilience,omitzero"`
	Limits     RunLimits     `json:"limits,omitzero"`
}

// Runtime is the container the entrypoint runs in.
type Runtime struct {
	// Image is the container image; the platform's allow-list applies.
	Image string `json:"image" jsonschema:"required,minLength=1,maxLength=512"`
	// Env holds literal environment variables.
	Env map[string]string `json:"env,omitempty"`
	// EnvSecret maps an environment variable to a Secret key, written
	// "secret-name:key", in the run's namespace.
	EnvSecret map[string]string `json:"env_secret,omitempty"`
	// WorkingDir is an absolute path in the container; defaults to the
	// checked-out source.
	WorkingDir string `json:"working_dir,omitempty" jsonschema:"pattern=^/"`
}

// Compute is what one run needs. Job runs use gpus, cpu, memory and nodes;
// RayJob runs use workers, gpus_per_worker, cpu and memory per worker, and head.
type Compute struct {
	// GPUs per pod (per node for multi-node runs). Defaults from the profile.
	GPUs *int `json:"gpus,omitempty" jsonschema:"minimum=0,maximum=64"`
	// CPU per pod (per Ray worker), a Kubernetes quantity such as 8 or 500m.
	CPU *resource.Quantity `json:"cpu,omitempty"`
	// Memory per pod (per Ray worker), a Kubernetes quantity such as 64Gi.
	Memory *resource.Quantity `json:"memory,omitempty"`
	// Nodes is the number of pods of a multi-node torchrun Job.
	Nodes int `json:"nodes,omitempty" jsonschema:"minimum=1,maximum=512"`
	// Workers is the number of Ray GPU workers.
	Workers int `json:"workers,omitempty" jsonschema:"minimum=1,maximum=1024"`
	// GPUsPerWorker is the GPUs of each Ray worker.
	GPUsPerWorker *int `json:"gpus_per_worker,omitempty" jsonschema:"minimum=0,maximum=64"`
	// Head is the Ray head's resources (it runs no GPU work).
	Head *HeadResources `json:"head,omitempty"`
	// Placement keeps the run's GPU pods together on the platform's
	// topology: any, same-<level> (all pods in one domain of that level,
	// such as same-rack) or prefer-same-<level> (there if it has room, else
	// as close as possible). Multi-node runs always get one pod per host.
	Placement string `json:"placement,omitempty" jsonschema:"maxLength=70,pattern=^(any|(prefer-)?same-[a-z0-9]+)$"`
	// MIG asks one slice of a MIG-partitioned GPU, by NVIDIA profile name
	// (such as 1g.18gb), instead of whole GPUs; the platform lists which
	// profiles each tenant and compute profile may use.
	MIG string `json:"mig,omitempty" jsonschema:"maxLength=20,pattern=^[0-9]+g\\.[0-9]+gb$"`
}

// HeadResources sizes a Ray head pod.
type HeadResources struct {
	CPU    *resource.Quantity `json:"cpu,omitempty"`
	Memory *resource.Quantity `json:"memory,omitempty"`
}

// Execution says how the entrypoint is started.
type Execution struct {
	// Launcher is python (default) or torchrun (required for nodes > 1).
	Launcher Launcher `json:"launcher,omitempty" jsonschema:"enum=python,enum=torchrun"`
	// ProcessesPerNode is torchrun's --nproc-per-node; defaults to the GPUs per node.
	ProcessesPerNode int `json:"processes_per_node,omitempty" jsonschema:"minimum=1,maximum=64"`
}

// PolicyRequest picks among what the platform policy offers the tenant.
type PolicyRequest struct {
	// Profile is a compute profile name; defaults to the tenant's default.
	Profile string `json:"profile,omitempty" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Queue is one of the tenant's LocalQueues; defaults to the tenant's first.
	Queue string `json:"queue,omitempty" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
	// Priority is a priority name from the policy.
	Priority string `json:"priority,omitempty" jsonschema:"maxLength=63,pattern=^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"`
}

// Storage names the tenant's data volume and paths on it.
type Storage struct {
	// DataPVC is an existing PersistentVolumeClaim mounted at /data.
	DataPVC string `json:"data_pvc,omitempty" jsonschema:"maxLength=253,pattern=^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"`
	// Output is a directory on the data volume, relative to /data; exported
	// as TAU_OUTPUT_DIR.
	Output string `json:"output,omitempty"`
	// Checkpoint is a directory on the data volume, relative to /data;
	// exported as TAU_CHECKPOINT_DIR and used to resume retries.
	Checkpoint string `json:"checkpoint,omitempty"`
}

// Resilience asks for retries; the platform's limits cap them.
type Resilience struct {
	// MaxRetries is how many times a failed run is tried again.
	MaxRetries int `json:"max_retries,omitempty" jsonschema:"minimum=0,maximum=100"`
	// RetryOn lists the failure classes that are retried.
	RetryOn []string `json:"retry_on,omitempty" jsonschema:"enum=Preempted,enum=NodeLost,enum=WorkerLost,enum=GPUFault,enum=Infrastructure,enum=OOMKilled,enum=ImagePull,enum=Timeout,enum=UserError"`
	// Backoff is the wait before a retry, doubling from Initial up to Max.
	Backoff Backoff `json:"backoff,omitzero"`
	// TerminationGrace is how long pods get after SIGTERM (preemption,
	// cancellation, a lost node) to flush a checkpoint before they are
	// killed; 30s by default, capped by the platform.
	TerminationGrace Duration `json:"termination_grace,omitzero"`
}

// Backoff is an exponential retry delay.
type Backoff struct {
	Initial Duration `json:"initial,omitzero"`
	Max     Duration `json:"max,omitzero"`
}

// RunLimits bounds one run.
type RunLimits struct {
	// Timeout is the maximum run time of one attempt, such as 12h.
	Timeout Duration `json:"timeout,omitzero"`
	// MaxQueueTime fails the run, with the reason it waited, when an
	// attempt waits longer than this in the queue; capped by the platform.
	MaxQueueTime Duration `json:"max_queue_time,omitzero"`
	// MaxPreemptions fails the run once it has been preempted more than
	// this many times, instead of retrying (0: at the first preemption).
	MaxPreemptions *int `json:"max_preemptions,omitempty" jsonschema:"minimum=0,maximum=100"`
}

// FailureClasses are the values resilience.retry_on accepts
// (taugridv1.RetryableFailureClasses). RetryOn's jsonschema enum repeats
// them, as a struct tag must; TestRetryOnsSchemaEnumIsTheRetryableClasses
// holds the two together.
var FailureClasses = classNames(taugridv1.RetryableFailureClasses)

// classNames are the classes as tau.yaml spells them.
func classNames(classes []taugridv1.FailureClass) []string {
	out := make([]string, len(classes))
	for i, c := range classes {
		out[i] = string(c)
	}
	return out
}

// Duration is a time span written as a Go duration string ("90s", "12h").
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return fmt.Errorf("invalid duration %q: expected a number with a unit, such as 90s, 30m or 12h", string(b))
	}
	d.Duration = v
	return nil
}

// MarshalText writes the duration as a Go duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// IsZero reports whether the duration was left unset.
func (d Duration) IsZero() bool { return d.Duration == 0 }
