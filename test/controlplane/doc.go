// Package controlplane starts a real Kubernetes control plane for tests: etcd and
// kube-apiserver through controller-runtime's envtest, and optionally the real Kueue
// controller and KubeRay operator as local processes, all from binaries built by
// hack/testbin.sh (see docs/testing.md).
//
// Every process it starts is its own process group and is killed by the kernel when
// the test process dies (Pdeathsig), so an interrupted or crashed test leaves nothing
// running. Nothing here needs root.
//
// The package is Linux-only: it relies on Pdeathsig and util-linux's setpriv.
package controlplane
