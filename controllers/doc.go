// Package controllers is the home of TauGrid's controllers, one package
// each, named for what it owns:
//
//   - platform: a TauPlatform's policy and the Kueue objects it declares;
//   - repository: a TauRepository's polls, the TauRuns its refs request,
//     refused refs and pull request checks;
//   - run: a TauRun from its Job or RayJob to its end, retries included;
//   - sealing: the evidence bundle of every ended attempt;
//   - forgestatus: the commit statuses of runs and refused refs;
//   - janitor: quota held for nothing;
//   - runmetrics: the runs' Prometheus metrics.
//
// No controller imports another (TestNoControllerImportsAnother): they
// talk through the API objects, their status and annotations, as
// Kubernetes controllers do. What they all need is in shared, which
// imports none of them; decisions two need are pure functions in packages
// of data (render, placement, runs, policy). The tests that run several
// controllers together against the real control plane live in
// integration. cmd/tau-controller wires them all, in setupControllers.
package controllers
