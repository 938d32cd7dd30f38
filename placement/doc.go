// Package placement decides, from data alone, where a run's pods may go on
// a cluster with Kueue Topology-Aware Scheduling: the names researchers
// give topology levels, whether a run's pods can ever fit one domain of a
// level (from the cached nodes, with no API call), and what Kueue's TAS
// messages mean in plain words. It imports no TauGrid package, so the
// renderer, the controller and the CLI can all use it.
package placement
