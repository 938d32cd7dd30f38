package render

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"

	rayv1 "github.com/ray-project/kuberay/ray-operator/apis/ray/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Labels and annotations TauGrid puts on what it creates.
const (
	LabelRun        = "taugrid.dev/run"
	LabelRepository = "taugrid.dev/repository"
	LabelAttempt    = "taugrid.dev/attempt"
	LabelManagedBy  = "app.kubernetes.io/managed-by"
	ManagedBy       = "taugrid"

	LabelQueueName     = "kueue.x-k8s.io/queue-name"
	LabelPriorityClass = "kueue.x-k8s.io/priority-class"

	AnnotationCommit       = "taugrid.dev/commit"
	AnnotationTarget       = "taugrid.dev/target"
	AnnotationTauFile      = "taugrid.dev/tau-file"
	AnnotationConfigDigest = "taugrid.dev/config-digest"
	AnnotationPolicyDigest = "taugrid.dev/policy-digest"
	AnnotationPolicyCommit = "taugrid.dev/policy-commit"

	// AnnotationKeepAfterFinished is, on a RayJob, how many seconds the
	// ended RayJob object is kept for the record (the platform's
	// ttl_after_finished); the run reconciler deletes it then. A Job says
	// the same in its own spec.ttlSecondsAfterFinished.
	AnnotationKeepAfterFinished = "taugrid.dev/keep-after-finished"
)

// Paths inside every run container.
const (
	SourceDir     = "/tau/source"
	DataDir       = "/data"
	ScratchDir    = "/tau/scratch"
	scratchOutput = ScratchDir + "/output"
	scratchCkpt   = ScratchDir + "/checkpoints"
	// ResumeLink is TAU_RESUME_FROM: a link to the run's latest complete
	// checkpoint, made by the init container; absent when there is none.
	ResumeLink = ScratchDir + "/resume"
	// CheckpointMarker is the file a job writes, last, into a checkpoint
	// directory under TAU_CHECKPOINT_DIR once the checkpoint is complete.
	// Directories without it are partial writes and never resumed from.
	CheckpointMarker = "TAU_COMPLETE"
	torchrunPort     = 29500
)

// Render turns a resolved plan into the objects one attempt submits: a
// suspended Job (plus a headless Service for multi-node torchrun) or a
// suspended RayJob, the workload always first, and the NetworkPolicy that
// fences the run's pods. The same plan always gives the same objects.
func Render(p *Plan) []client.Object {
	switch {
	case p.Engine == EngineRayJob:
		return []client.Object{rayJob(p), networkPolicy(p)}
	case p.Nodes > 1:
		return []client.Object{job(p), headlessService(p), networkPolicy(p)}
	default:
		return []client.Object{job(p), networkPolicy(p)}
	}
}

// RenderConfig resolves a tau file under policy and renders it.
func RenderConfig(rc *RunConfig, pol *Policy, tenant string, run Run) ([]client.Object, error) {
	p, err := Resolve(rc, pol, tenant, run)
	if err != nil {
		return nil, err
	}
	return Render(p), nil
}

// MaxRayJobName is KubeRay's limit on a RayJob's name (its RayCluster's,
// 53, less the suffix it adds).
const MaxRayJobName = 47

// WorkloadName is the name of the Job or RayJob of an attempt.
func WorkloadName(run string, attempt int) string {
	return fmt.Sprintf("%s-%d", run, attempt)
}

// RunOfWorkload is the inverse of WorkloadName: the run a workload belongs to.
func RunOfWorkload(name string) (string, bool) {
	i := strings.LastIndexByte(name, '-')
	if i <= 0 {
		return "", false
	}
	if n, err := strconv.Atoi(name[i+1:]); err != nil || n < 1 {
		return "", false
	}
	return name[:i], true
}

// TargetFile is the tau file of a target: tau.yaml for "default", else
// tau/<target>.yaml.
func TargetFile(target string) string {
	if target == "" || target == "default" {
		return "tau.yaml"
	}
	return "tau/" + target + ".yaml"
}

func (p *Plan) objectMeta(name string) metav1.ObjectMeta {
	labels := p.podLabels()
	labels[LabelQueueName] = p.Queue
	if p.PriorityClass != "" {
		labels[LabelPriorityClass] = p.PriorityClass
	}
	ann := map[string]string{
		AnnotationCommit:       p.Run.Commit,
		AnnotationTarget:       p.Run.Target,
		AnnotationTauFile:      p.Config.File,
		AnnotationConfigDigest: p.Config.Digest,
		AnnotationPolicyDigest: p.PolicyDigest,
	}
	if p.Run.PolicyCommit != "" {
		ann[AnnotationPolicyCommit] = p.Run.PolicyCommit
	}
	return metav1.ObjectMeta{Name: name, Namespace: p.Tenant.Namespace, Labels: labels, Annotations: ann}
}

func (p *Plan) podLabels() map[string]string {
	l := map[string]string{
		LabelRun:       p.Run.Name,
		LabelAttempt:   strconv.Itoa(p.Run.Attempt),
		LabelManagedBy: ManagedBy,
	}
	if p.Run.Repository != "" {
		l[LabelRepository] = p.Run.Repository
	}
	return l
}

func job(p *Plan) *batchv1.Job {
	name := WorkloadName(p.Run.Name, p.Run.Attempt)
	pod := p.podSpec(mainContainer(p, "main", p.GPUs, p.command()))
	pod.RestartPolicy = corev1.RestartPolicyNever
	p.addMIG(&pod.Containers[0])
	j := &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: p.objectMeta(name),
		Spec: batchv1.JobSpec{
			Suspend:                 ptr.To(true),
			BackoffLimit:            ptr.To[int32](0), // TauGrid classifies failures and retries itself
			Parallelism:             ptr.To(int32(p.Nodes)),
			Completions:             ptr.To(int32(p.Nodes)),
			ActiveDeadlineSeconds:   ptr.To(int64(p.Timeout.Seconds())),
			TTLSecondsAfterFinished: ptr.To(int32(p.TTL.Seconds())),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: p.podLabels(), Annotations: p.podAnnotations(p.topologyAnnotations(""))},
				Spec:       pod,
			},
		},
	}
	if p.Nodes > 1 {
		j.Spec.CompletionMode = ptr.To(batchv1.IndexedCompletion)
		j.Spec.Template.Spec.Subdomain = name
		c := &j.Spec.Template.Spec.Containers[0]
		c.Env = append(c.Env,
			corev1.EnvVar{Name: "MASTER_ADDR", Value: fmt.Sprintf("%s-0.%s", name, name)},
			corev1.EnvVar{Name: "MASTER_PORT", Value: strconv.Itoa(torchrunPort)},
			corev1.EnvVar{Name: "NODE_RANK", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
				FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}},
		)
		c.Ports = []corev1.ContainerPort{{Name: "rendezvous", ContainerPort: torchrunPort}}
		j.Spec.Template.Spec.Affinity = onePerHost(j.Spec.Template.Spec.Affinity, p.Run.Name, strconv.Itoa(p.Run.Attempt))
		p.addHostSlot(c)
	}
	return j
}

// headlessService gives the pods of a multi-node Job stable DNS names, so
// rank 0 is reachable as <job>-0.<job>.
func headlessService(p *Plan) *corev1.Service {
	name := WorkloadName(p.Run.Name, p.Run.Attempt)
	meta := p.objectMeta(name)
	delete(meta.Labels, LabelQueueName)
	delete(meta.Labels, LabelPriorityClass)
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta,
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 map[string]string{LabelRun: p.Run.Name, LabelAttempt: strconv.Itoa(p.Run.Attempt)},
			Ports:                    []corev1.ServicePort{{Name: "rendezvous", Port: torchrunPort}},
		},
	}
}

// command is the container command of a Job's pods.
func (p *Plan) command() []string {
	cfg := &p.Config.Config
	if cfg.Execution.Launcher != LauncherTorchrun {
		return append([]string{"python", cfg.Entrypoint}, cfg.Args...)
	}
	cmd := []string{"torchrun", fmt.Sprintf("--nproc-per-node=%d", p.ProcessesPerNode)}
	if p.Nodes == 1 {
		cmd = append(cmd, "--standalone", "--nnodes=1")
	} else {
		cmd = append(cmd, fmt.Sprintf("--nnodes=%d", p.Nodes), "--node-rank=$(NODE_RANK)",
			"--master-addr=$(MASTER_ADDR)", "--master-port=$(MASTER_PORT)")
	}
	return append(append(cmd, cfg.Entrypoint), cfg.Args...)
}

func rayJob(p *Plan) *rayv1.RayJob {
	name := WorkloadName(p.Run.Name, p.Run.Attempt)
	meta := p.objectMeta(name)
	meta.Annotations[AnnotationKeepAfterFinished] = strconv.Itoa(int(p.TTL.Seconds()))
	head := p.podSpec(mainContainer(p, "ray-head", 0, nil))
	head.Containers[0].Resources = resources(p, p.HeadCPU, p.HeadMemory, 0)
	head.Containers[0].Ports = []corev1.ContainerPort{
		{Name: "gcs", ContainerPort: 6379}, {Name: "dashboard", ContainerPort: 8265}, {Name: "client", ContainerPort: 10001}}
	worker := p.podSpec(mainContainer(p, "ray-worker", p.GPUs, nil))
	submitter := p.podSpec(corev1.Container{
		Name: "ray-job-submitter", Image: p.Image, SecurityContext: containerSecurity(),
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: fallbackCPU, corev1.ResourceMemory: resource.MustParse("1Gi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
		},
	})
	submitter.RestartPolicy = corev1.RestartPolicyNever
	// It only submits: no source, no volumes, no progress to report.
	submitter.Volumes, submitter.InitContainers = nil, nil
	submitter.Containers[0].VolumeMounts, submitter.Containers[0].Env = nil, nil
	podMeta := metav1.ObjectMeta{Labels: p.podLabels(), Annotations: p.podAnnotations(p.topologyAnnotations(rayPodSetGroup))}
	submitterMeta := metav1.ObjectMeta{Labels: p.podLabels(), Annotations: p.podAnnotations(p.submitterTopology())}
	return &rayv1.RayJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: "ray.io/v1", Kind: "RayJob"},
		ObjectMeta: meta,
		Spec: rayv1.RayJobSpec{
			Suspend:    true,
			Entrypoint: p.rayEntrypoint(),
			// KubeRay deletes the RayCluster, and with it every GPU the
			// run held, the moment the Ray job ends: a TTL here would keep
			// the cluster, not the record. The RayJob itself is kept for
			// ttl_after_finished (AnnotationKeepAfterFinished).
			ShutdownAfterJobFinishes: true,
			TTLSecondsAfterFinished:  0,
			ActiveDeadlineSeconds:    ptr.To(int32(p.Timeout.Seconds())),
			BackoffLimit:             ptr.To[int32](0),
			SubmissionMode:           rayv1.K8sJobMode,
			SubmitterPodTemplate:     &corev1.PodTemplateSpec{ObjectMeta: submitterMeta, Spec: submitter},
			RayClusterSpec: &rayv1.RayClusterSpec{
				HeadGroupSpec: rayv1.HeadGroupSpec{
					RayStartParams: map[string]string{"dashboard-host": "0.0.0.0", "num-gpus": "0"},
					Template:       corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: head},
				},
				WorkerGroupSpecs: []rayv1.WorkerGroupSpec{{
					GroupName:      "gpu",
					Replicas:       ptr.To(int32(p.Workers)),
					MinReplicas:    ptr.To(int32(p.Workers)),
					MaxReplicas:    ptr.To(int32(p.Workers)),
					RayStartParams: map[string]string{},
					Template:       corev1.PodTemplateSpec{ObjectMeta: podMeta, Spec: worker},
				}},
			},
		},
	}
}

// rayEntrypoint is the shell command Ray runs on the head.
func (p *Plan) rayEntrypoint() string {
	cfg := &p.Config.Config
	words := append([]string{"python", cfg.Entrypoint}, cfg.Args...)
	for i, w := range words {
		words[i] = shellQuote(w)
	}
	return "cd " + shellQuote(p.workingDir()) + " && " + strings.Join(words, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,@%+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func (p *Plan) workingDir() string {
	if wd := p.Config.Runtime.WorkingDir; wd != "" {
		return wd
	}
	return SourceDir
}

// mainContainer is a container that runs the researcher's code: their
// image, the TAU_* environment, their env and secrets, the volumes.
func mainContainer(p *Plan, name string, gpus int, command []string) corev1.Container {
	return corev1.Container{
		Name:            name,
		Image:           p.Image,
		Command:         command,
		WorkingDir:      p.workingDir(),
		Env:             p.env(),
		Resources:       resources(p, p.CPU, p.Memory, gpus),
		VolumeMounts:    p.volumeMounts(),
		SecurityContext: containerSecurity(),
	}
}

// CheckpointDir is where the run keeps its checkpoints: its own directory
// under storage.checkpoint, so that runs sharing a volume never resume from
// each other's; "" without storage.checkpoint.
func (p *Plan) CheckpointDir() string {
	if c := p.Config.Storage.Checkpoint; c != "" {
		return path.Join(DataDir, c, p.Run.Name)
	}
	return ""
}

// resumes reports whether the attempt's pods resume from a checkpoint.
func (p *Plan) resumes() bool { return p.Run.Resume && p.CheckpointDir() != "" }

func (p *Plan) env() []corev1.EnvVar {
	out, ckpt := scratchOutput, scratchCkpt
	if o := p.Config.Storage.Output; o != "" {
		out = path.Join(DataDir, o)
	}
	if c := p.CheckpointDir(); c != "" {
		ckpt = c
	}
	env := []corev1.EnvVar{
		{Name: "TAU_RUN", Value: p.Run.Name},
		{Name: "TAU_COMMIT", Value: p.Run.Commit},
		{Name: "TAU_REPOSITORY", Value: p.Run.Repository},
		{Name: "TAU_ATTEMPT", Value: strconv.Itoa(p.Run.Attempt)},
		{Name: "TAU_OUTPUT_DIR", Value: out},
		{Name: "TAU_CHECKPOINT_DIR", Value: ckpt},
	}
	if p.resumes() {
		env = append(env, corev1.EnvVar{Name: "TAU_RESUME_FROM", Value: ResumeLink})
	}
	if p.Run.RetryReason != "" {
		env = append(env, corev1.EnvVar{Name: "TAU_RETRY_REASON", Value: p.Run.RetryReason})
	}
	rt := &p.Config.Runtime
	for _, k := range slices.Sorted(maps.Keys(rt.Env)) {
		env = append(env, corev1.EnvVar{Name: k, Value: rt.Env[k]})
	}
	for _, k := range slices.Sorted(maps.Keys(rt.EnvSecret)) {
		secret, key, _ := strings.Cut(rt.EnvSecret[k], ":")
		env = append(env, corev1.EnvVar{Name: k, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: key}}})
	}
	return env
}

func resources(p *Plan, cpu, memory resource.Quantity, gpus int) corev1.ResourceRequirements {
	r := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: memory},
	}
	if gpus > 0 {
		q := resourceFromInt(gpus)
		r.Requests[p.Profile.GPUResource] = q
		r.Limits[p.Profile.GPUResource] = q
	}
	return r
}

func (p *Plan) volumeMounts() []corev1.VolumeMount {
	m := []corev1.VolumeMount{
		{Name: "source", MountPath: SourceDir},
		{Name: "scratch", MountPath: ScratchDir},
		{Name: "tmp", MountPath: "/tmp"},
		{Name: "dshm", MountPath: "/dev/shm"},
	}
	if p.Config.Storage.DataPVC != "" {
		m = append(m, corev1.VolumeMount{Name: "data", MountPath: DataDir})
	}
	return m
}

// podSpec wraps containers in the pod every run gets: restricted security,
// the profile's placement, the volumes and the source fetch.
func (p *Plan) podSpec(c corev1.Container) corev1.PodSpec {
	sec := p.Security
	spec := corev1.PodSpec{
		Containers:                   []corev1.Container{c},
		ServiceAccountName:           p.Tenant.ServiceAccount,
		AutomountServiceAccountToken: ptr.To(false),
		EnableServiceLinks:           ptr.To(false),
		NodeSelector:                 p.Profile.NodeSelector,
		Tolerations:                  p.Profile.Tolerations,
		Affinity:                     avoidNodes(p.Profile.Affinity, p.Run.AvoidNodes),
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			RunAsUser:      ptr.To(sec.RunAsUser),
			RunAsGroup:     ptr.To(sec.RunAsGroup),
			FSGroup:        ptr.To(sec.FSGroup),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Volumes:                       p.volumes(),
		TerminationGracePeriodSeconds: ptr.To(int64(p.TerminationGrace.Seconds())),
	}
	if src := p.Run.Source; src != nil {
		command := []string{"tau", "fetch-source", "--url=" + src.URL, "--sha256=" + src.SHA256, "--dest=" + SourceDir,
			"--token-file=" + SourceTokenDir + "/" + tokenFile, "--termination-log=" + corev1.TerminationMessagePathDefault}
		mounts := []corev1.VolumeMount{{Name: "source", MountPath: SourceDir},
			{Name: sourceTokenVolume, MountPath: SourceTokenDir, ReadOnly: true}}
		// The token is mounted in the init container only: the training
		// code never holds the credential that fetches the source.
		spec.Volumes = append(spec.Volumes, sourceToken())
		if p.resumes() {
			// The init container finds the latest complete checkpoint; the
			// data volume is read-only to it.
			command = append(command, "--checkpoint-dir="+p.CheckpointDir(), "--resume-link="+ResumeLink)
			mounts = append(mounts, corev1.VolumeMount{Name: "scratch", MountPath: ScratchDir},
				corev1.VolumeMount{Name: "data", MountPath: DataDir, ReadOnly: true})
		}
		spec.InitContainers = []corev1.Container{{
			Name:            SourceContainer,
			Image:           qualifiedOrAsIs(src.Image),
			Command:         command,
			VolumeMounts:    mounts,
			SecurityContext: containerSecurity(),
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
		}}
		if src.Progress != "" {
			reportProgress(&spec, src.Progress)
		}
	}
	return spec
}

// The training code's credential for reporting its progress: a token for
// the progress audience only, bound to the pod. It can say how far this
// pod's own attempt is and nothing else: the source server refuses it,
// and so does the API server (not its audience).
const (
	// ProgressTokenAudience is the audience of the progress token; the
	// progress endpoint accepts no other.
	ProgressTokenAudience = "taugrid.dev/progress"
	// ProgressTokenDir is where the training containers find it.
	ProgressTokenDir    = "/var/run/secrets/taugrid.dev/progress"
	progressTokenVolume = "tau-progress-token"
	// progressTokenSeconds: the kubelet renews it before it expires.
	progressTokenSeconds = 3600
)

// reportProgress gives every training container of spec the URL to POST
// its progress to and the token to do it with ($TAU_PROGRESS_URL,
// $TAU_PROGRESS_TOKEN_FILE).
func reportProgress(spec *corev1.PodSpec, url string) {
	spec.Volumes = append(spec.Volumes, corev1.Volume{Name: progressTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: ProgressTokenAudience, ExpirationSeconds: ptr.To(int64(progressTokenSeconds)), Path: tokenFile}}},
		DefaultMode: ptr.To(int32(0o440))}}})
	for i := range spec.Containers {
		c := &spec.Containers[i]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: progressTokenVolume, MountPath: ProgressTokenDir, ReadOnly: true})
		c.Env = append(c.Env, corev1.EnvVar{Name: "TAU_PROGRESS_URL", Value: url},
			corev1.EnvVar{Name: "TAU_PROGRESS_TOKEN_FILE", Value: ProgressTokenDir + "/" + tokenFile})
	}
}

// SourceContainer is the run pods' init container: tau fetch-source,
// which downloads the run's source. On success it writes all it printed
// to its termination message as well as to its log (--termination-log),
// so the evidence sealer has its log from the pod's status and reads no
// log from the kubelet for it.
const SourceContainer = "tau-source"

// The init container's credential for the source server: a ServiceAccount
// token for the source audience, bound to the pod, which the controller
// checks with a TokenReview.
const (
	// SourceTokenAudience is the audience of the init container's token;
	// the source server accepts no other.
	SourceTokenAudience = "taugrid.dev/source"
	// SourceTokenDir is where the init container finds its token.
	SourceTokenDir    = "/var/run/secrets/taugrid.dev/source"
	tokenFile         = "token" // in either token's directory
	sourceTokenVolume = "tau-source-token"
	// sourceTokenSeconds is the shortest life the API server grants.
	sourceTokenSeconds = 600
)

func sourceToken() corev1.Volume {
	return corev1.Volume{Name: sourceTokenVolume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
			Audience: SourceTokenAudience, ExpirationSeconds: ptr.To(int64(sourceTokenSeconds)), Path: tokenFile}}},
		DefaultMode: ptr.To(int32(0o400))}}}
}

func (p *Plan) volumes() []corev1.Volume {
	empty := func(name string, medium corev1.StorageMedium) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: medium}}}
	}
	v := []corev1.Volume{empty("source", ""), empty("scratch", ""), empty("tmp", ""), empty("dshm", corev1.StorageMediumMemory)}
	if pvc := p.Config.Storage.DataPVC; pvc != "" {
		v = append(v, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: pvc}}})
	}
	return v
}

// containerSecurity is the Restricted Pod Security Standard for a container.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func resourceFromInt(n int) resource.Quantity {
	return *resource.NewQuantity(int64(n), resource.DecimalSI)
}

// avoidNodes adds "not on these hosts" to every required node selector term
// of the profile's affinity (creating one when there is none).
func avoidNodes(a *corev1.Affinity, nodes []string) *corev1.Affinity {
	if len(nodes) == 0 {
		return a
	}
	out := &corev1.Affinity{}
	if a != nil {
		out = a.DeepCopy()
	}
	if out.NodeAffinity == nil {
		out.NodeAffinity = &corev1.NodeAffinity{}
	}
	na := out.NodeAffinity
	if na.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		na.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{}}}
	}
	req := corev1.NodeSelectorRequirement{Key: corev1.LabelHostname, Operator: corev1.NodeSelectorOpNotIn, Values: nodes}
	terms := na.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	for i := range terms {
		terms[i].MatchExpressions = append(terms[i].MatchExpressions, req)
	}
	return out
}
