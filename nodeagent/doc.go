// Package nodeagent is tau-nodeagent: it watches the GPUs of one node through NVML
// and keeps jobs off broken ones.
//
// It reads NVML (XID events as they happen; ECC, retired pages, remapped rows,
// NVLink, temperature and clocks by polling; the GPU count), turns what it reads
// into per-GPU check results with pure functions (Evaluate, Decide, VerdictFor,
// BreakerAllows), and writes the outcome to its own Node: the condition
// TauGPUHealthy, the taint taugrid.dev/gpu-unhealthy:NoSchedule and Kubernetes
// Events. It serves Prometheus metrics, the GPUs' use by pod (/gpus) and
// /healthz; /metrics and /gpus only to callers whose ServiceAccount token the
// API server vouches for and whose RBAC grants get on the path (Guard).
//
// Severities: a fatal result (a fatal XID per XIDPolicy, uncorrectable ECC
// errors, a pending or failed row remap, a pending page retirement, a GPU gone,
// lost or needing a reset, an NVLink down) sets the condition False and taints.
// A warning (temperature at the slowdown threshold, hardware or thermal clock
// slowdown, warning-class XIDs) keeps the condition True with reason
// GPUsDegraded. When NVML cannot be loaded, or a call fails or passes its
// deadline, the condition is Unknown and nothing is tainted: the agent's own
// trouble is never reported as a GPU's.
//
// A fatal result latches. It clears only on evidence of recovery followed by a
// healthy window (RecoveryPolicy.Window) with no fatal result on that GPU. The
// evidence is one of:
//   - the node rebooted (its boot ID changed);
//   - the signal cleared, which only a reset does (ECC volatile counters back to
//     zero, no remap pending, the GPU or the link back);
//   - the GPU left and came back (a reset or driver reload);
//   - an operator set the annotation taugrid.dev/gpu-reset-at to an RFC 3339
//     time after the fault, having reset the GPU in a way the agent cannot see.
//
// Latched faults are kept in the node annotation taugrid.dev/gpu-health, so a
// restarted agent neither forgets nor re-raises them; the circuit breaker of
// every agent reads the time each node was tainted from it.
package nodeagent
