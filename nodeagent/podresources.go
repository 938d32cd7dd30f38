package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/taugrid/taugrid/api/gpus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	podresourcesv1 "k8s.io/kubelet/pkg/apis/podresources/v1"
)

// DefaultPodResourcesSocket is where the kubelet serves its PodResources API.
const DefaultPodResourcesSocket = "/var/lib/kubelet/pod-resources/kubelet.sock"

// podResourcesMaxMessage bounds one List answer. The kubelet's own default is
// 16 MiB; a node with hundreds of pods answers in well under 1 MiB.
const podResourcesMaxMessage = 16 << 20

// Holder is the container a GPU is allocated to, as the kubelet tells it.
type Holder = gpus.Holder

// PodResources is the part of the kubelet's PodResources API the agent uses:
// podresourcesv1.PodResourcesListerClient satisfies it.
type PodResources interface {
	List(ctx context.Context, in *podresourcesv1.ListPodResourcesRequest, opts ...grpc.CallOption) (*podresourcesv1.ListPodResourcesResponse, error)
}

// DialPodResources connects to the kubelet's PodResources socket. gRPC connects
// lazily, so a kubelet that is not there yet fails the first List, not this.
func DialPodResources(socket string) (PodResources, io.Closer, error) {
	conn, err := grpc.NewClient("unix://"+socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(podResourcesMaxMessage)))
	if err != nil {
		return nil, nil, fmt.Errorf("kubelet PodResources socket %s: %w", socket, err)
	}
	return podresourcesv1.NewPodResourcesListerClient(conn), conn, nil
}

// gpuResource reports whether a device plugin resource is a whole NVIDIA GPU
// (nvidia.com/gpu, or a renamed or shared one such as nvidia.com/gpu.shared).
// MIG slices (nvidia.com/mig-*) carry MIG UUIDs, which name no GPU that NVML's
// device list shows, so they are not attributed.
func gpuResource(name string) bool {
	return strings.HasPrefix(name, "nvidia.com/") && !strings.HasPrefix(name, "nvidia.com/mig-")
}

// Holders fills into (cleared first) with the holder of each GPU UUID in a List
// answer. The NVIDIA device plugin names devices by GPU UUID; a time-sliced
// replica is "UUID::n", and several containers may then share one GPU: the
// first listed is kept, so that the series per GPU stays one.
func Holders(resp *podresourcesv1.ListPodResourcesResponse, into map[string]Holder) {
	clear(into)
	for _, pod := range resp.GetPodResources() {
		for _, c := range pod.GetContainers() {
			for _, dev := range c.GetDevices() {
				if !gpuResource(dev.GetResourceName()) {
					continue
				}
				for _, id := range dev.GetDeviceIds() {
					uuid, _, _ := strings.Cut(id, "::")
					if _, taken := into[uuid]; !taken {
						into[uuid] = Holder{Namespace: pod.GetNamespace(), Pod: pod.GetName(), Container: c.GetName()}
					}
				}
			}
		}
	}
}

// attribute asks the kubelet which containers hold the GPUs. On failure the
// GPUs are shown unattributed (never attributed to a pod that may be gone) and
// the error is kept for the report.
func (a *Agent) attribute(ctx context.Context) {
	a.obs.Holders, a.obs.HoldersErr = nil, nil
	if a.podResources == nil || len(a.obs.GPUs) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.CallTimeout)
	defer cancel()
	resp, err := a.podResources.List(ctx, &podresourcesv1.ListPodResourcesRequest{})
	if err != nil {
		a.metrics.podResourcesErrors.Inc()
		a.obs.HoldersErr = fmt.Errorf("kubelet PodResources List: %w", err)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			a.obs.HoldersErr = fmt.Errorf("kubelet PodResources List: no answer within %s", a.cfg.CallTimeout)
		}
		return
	}
	Holders(resp, a.holders)
	a.obs.Holders = a.holders
}
