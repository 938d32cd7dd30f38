package render

import (
	"net/netip"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// egressProfiles are CPU profiles with each egress: none (open), deny, and
// cluster to an object store and a node-local DNS cache.
const egressProfiles = `profiles:
- name: cpu
  max_gpus: 0
  max_nodes: 4
- name: cpu-deny
  max_gpus: 0
  max_nodes: 4
  egress: deny
- name: cpu-cluster
  max_gpus: 0
  max_nodes: 4
  egress: cluster
  egress_to:
  - to:
    - namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: minio}}
      podSelector: {matchLabels: {app: minio}}
    ports: [{port: 9000}]
  - to: [{ipBlock: {cidr: 169.254.20.10/32}}]
    ports: [{protocol: UDP, port: 53}]
`

// egressPolicy loads the example policy with those profiles and team-a's
// tenant keys extra.
func egressPolicy(t *testing.T, extra string) *Policy {
	t.Helper()
	fsys := examplePolicyFS(t)
	fsys["profiles.yaml"] = &fstest.MapFile{Data: []byte(egressProfiles)}
	fsys["tenants.yaml"] = &fstest.MapFile{Data: []byte(tenantWith(extra))}
	pol, err := LoadPolicy(fsys)
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

// destination is somewhere a run's pod may try to connect: a pod (its
// namespace and labels, and its address) or an address outside.
type destination struct {
	ns       string
	labels   labels.Set
	ip       string
	protocol corev1.Protocol
	port     int32
}

// destinations: what every run needs, what the platform names, and the
// strangers no fenced run may reach.
var destinations = map[string]destination{
	"the cluster DNS":                      {"kube-system", labels.Set{"k8s-app": "kube-dns"}, "10.244.0.10", corev1.ProtocolUDP, 53},
	"the run's own rank 0":                 {"team-a", labels.Set{LabelRun: "demo-7f3k2"}, "10.244.3.7", corev1.ProtocolTCP, 29500},
	"the source server":                    {"tau-system", labels.Set{"app.kubernetes.io/name": "tau-controller"}, "10.244.0.20", corev1.ProtocolTCP, 8080},
	"the object store":                     {"minio", labels.Set{"app": "minio"}, "10.244.5.2", corev1.ProtocolTCP, 9000},
	"the node-local DNS cache":             {"", nil, "169.254.20.10", corev1.ProtocolUDP, 53},
	"the collector":                        {"observability", labels.Set{"app": "otel"}, "10.244.6.2", corev1.ProtocolTCP, 4317},
	"tenant B's Ray dashboard":             {"team-b", labels.Set{LabelRun: "their-run"}, "10.244.1.5", corev1.ProtocolTCP, 8265},
	"tenant B's pod posing as the DNS":     {"team-b", labels.Set{"k8s-app": "kube-dns"}, "10.244.1.6", corev1.ProtocolUDP, 53},
	"tenant B's pod claiming this run":     {"team-b", labels.Set{LabelRun: "demo-7f3k2"}, "10.244.1.7", corev1.ProtocolTCP, 29500},
	"tenant B's pod on the source port":    {"team-b", labels.Set{"app.kubernetes.io/name": "tau-controller"}, "10.244.1.8", corev1.ProtocolTCP, 8080},
	"tenant A's other run":                 {"team-a", labels.Set{LabelRun: "other"}, "10.244.3.9", corev1.ProtocolTCP, 6379},
	"the object store on another port":     {"minio", labels.Set{"app": "minio"}, "10.244.5.2", corev1.ProtocolTCP, 22},
	"an address on the internet":           {"", nil, "203.0.113.9", corev1.ProtocolTCP, 443},
	"an IPv6 address on the internet":      {"", nil, "2001:db8::9", corev1.ProtocolTCP, 443},
	"the source server's namespace, other": {"tau-system", labels.Set{"app": "x"}, "10.244.0.21", corev1.ProtocolTCP, 22},
}

// From the attacker's side: a fenced run's pods reach what every run needs
// (DNS, their own run, the source server) and, under cluster, the
// platform's named destinations on their ports, and never another tenant's
// pods, another run of their own tenant, or the internet. The test reads
// the NetworkPolicy as a network plugin would; no CNI runs here.
func TestAFencedRunReachesOnlyWhatItNeedsAndWhatThePlatformNames(t *testing.T) {
	needs := []string{"the cluster DNS", "the run's own rank 0", "the source server"}
	tests := map[string]struct {
		tenant, profile string
		reaches         []string // nil: everything, no egress rule
	}{
		"open, the default: today's ingress-only fence": {profile: "cpu"},
		"a deny profile":                        {profile: "cpu-deny", reaches: needs},
		"a deny tenant on an open profile":      {tenant: "  egress: deny\n", profile: "cpu", reaches: needs},
		"a deny tenant on a cluster profile":    {tenant: "  egress: deny\n", profile: "cpu-cluster", reaches: needs},
		"an open tenant on a cluster profile":   {tenant: "  egress: open\n", profile: "cpu-cluster", reaches: append(needs[:3:3], "the object store", "the node-local DNS cache")},
		"a cluster tenant on a deny profile":    {tenant: collectorEgress, profile: "cpu-deny", reaches: needs},
		"a cluster tenant on an open profile":   {tenant: collectorEgress, profile: "cpu", reaches: append(needs[:3:3], "the collector")},
		"a cluster tenant on a cluster profile": {tenant: collectorEgress, profile: "cpu-cluster", reaches: append(needs[:3:3], "the collector", "the object store", "the node-local DNS cache")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			objs, err := renderWith(egressPolicy(t, tc.tenant), "schema_version: 1\nentrypoint: a.py\nruntime: {image: python:3}\npolicy: {profile: "+tc.profile+"}\n")
			if err != nil {
				t.Fatal(err)
			}
			np := objs[len(objs)-1].(*networkingv1.NetworkPolicy)
			checkFenced(t, np, objs[0]) // ingress as before, whatever egress is
			if tc.reaches == nil {
				if np.Spec.Egress != nil || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
					t.Errorf("open egress rendered egress rules: %v %+v", np.Spec.PolicyTypes, np.Spec.Egress)
				}
				return
			}
			if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
				t.Fatalf("policyTypes %v lack Egress: the pods' egress is open", np.Spec.PolicyTypes)
			}
			var got []string
			for d, dest := range destinations {
				if egressAdmits(t, np, dest) {
					got = append(got, d)
				}
			}
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.reaches))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("destinations the run's pods reach (-want +got):\n%s", diff)
			}
		})
	}
}

const collectorEgress = `  egress: cluster
  egress_to:
  - to: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: observability}}}]
    ports: [{port: 4317}]
`

// egressAdmits evaluates an egress policy for a connection to d, as a
// network plugin does: a podSelector alone means the policy's namespace;
// namespaceSelectors are matched against the namespace's name label;
// an ipBlock against the address.
func egressAdmits(t *testing.T, np *networkingv1.NetworkPolicy, d destination) bool {
	t.Helper()
	for _, rule := range np.Spec.Egress {
		if !portAdmits(rule.Ports, d) {
			continue
		}
		if len(rule.To) == 0 {
			return true
		}
		for _, peer := range rule.To {
			if peerAdmits(t, np.Namespace, peer, d) {
				return true
			}
		}
	}
	return false
}

func peerAdmits(t *testing.T, policyNS string, peer networkingv1.NetworkPolicyPeer, d destination) bool {
	if b := peer.IPBlock; b != nil {
		addr := netip.MustParseAddr(d.ip)
		if !netip.MustParsePrefix(b.CIDR).Contains(addr) {
			return false
		}
		return !slices.ContainsFunc(b.Except, func(e string) bool { return netip.MustParsePrefix(e).Contains(addr) })
	}
	if d.ns == "" {
		return false // not a pod: only an ipBlock can admit it
	}
	nsOK := peer.NamespaceSelector == nil && d.ns == policyNS ||
		peer.NamespaceSelector != nil && selects(t, *peer.NamespaceSelector, labels.Set{corev1.LabelMetadataName: d.ns})
	return nsOK && (peer.PodSelector == nil || selects(t, *peer.PodSelector, d.labels))
}

func portAdmits(ports []networkingv1.NetworkPolicyPort, d destination) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		switch {
		case proto != d.protocol:
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.Int && p.EndPort != nil:
			if d.port >= p.Port.IntVal && d.port <= *p.EndPort {
				return true
			}
		case p.Port.Type == intstr.Int && p.Port.IntVal == d.port:
			return true
		}
	}
	return false
}

// The rule to the source server comes from the archive's URL; a server no
// rule can admit, or one in a tenant's namespace, refuses a fenced run
// rather than rendering pods that cannot fetch their source.
func TestTheSourceServerRuleComesFromTheArchivesURL(t *testing.T) {
	tcp := corev1.ProtocolTCP
	tests := map[string]struct {
		url     string
		want    *networkingv1.NetworkPolicyEgressRule
		wantErr string
	}{
		"a cluster Service, with the cluster domain": {url: "http://tau-controller.taugrid-system.svc.cluster.local:9090/source/x.tar.gz",
			want: &networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: nameSelector("taugrid-system")}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptrTo(intstr.FromInt32(9090))}}}},
		"an IP address, https's port": {url: "https://192.0.2.10/source/x.tar.gz",
			want: &networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.10/32"}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptrTo(intstr.FromInt32(443))}}}},
		"a name outside the cluster": {url: "https://tau.example.com/source/x.tar.gz",
			wantErr: `egress deny: the run's pods could not fetch their source: the source server's URL https://tau.example.com/source/x.tar.gz: "tau.example.com" is neither a cluster Service (<service>.<namespace>.svc) nor an IP address; the platform team sets it (tau-controller --source-url)`},
		"a Service in a tenant's namespace": {url: "http://tau-controller.team-b.svc:9090/source/x.tar.gz",
			wantErr: `egress deny: the source server's URL http://tau-controller.team-b.svc:9090/source/x.tar.gz is in tenant team-b's namespace; fencing runs to it would let them reach that tenant's pods`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rc, err := LoadConfig("tau.yaml", []byte("schema_version: 1\nentrypoint: a.py\nruntime: {image: python:3}\npolicy: {profile: cpu-deny}\n"))
			if err != nil {
				t.Fatal(err)
			}
			run := testRun
			run.Source = &SourceArchive{URL: tc.url, SHA256: testRun.Source.SHA256, Image: testRun.Source.Image}
			p, err := Resolve(rc, egressPolicy(t, ""), "team-a", run)
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr {
					t.Fatalf("got %v\nwant %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.sourceRule(p.Run.Source.URL)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("source rule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAnOpenRunNeedsNoRuleToTheSourceServer(t *testing.T) {
	rc, err := LoadConfig("tau.yaml", []byte("schema_version: 1\nentrypoint: a.py\nruntime: {image: python:3}\npolicy: {profile: cpu}\n"))
	if err != nil {
		t.Fatal(err)
	}
	run := testRun
	run.Source = &SourceArchive{URL: "https://tau.example.com/source/x.tar.gz", SHA256: testRun.Source.SHA256, Image: testRun.Source.Image}
	if _, err := Resolve(rc, egressPolicy(t, ""), "team-a", run); err != nil {
		t.Errorf("an open run was refused for its source URL: %v", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

func selects(t *testing.T, sel metav1.LabelSelector, l labels.Set) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatal(err)
	}
	return s.Matches(l)
}

// The run controller attaches the source after Resolve. Set on the plan
// directly, as it does, a source gets the same fetch image and rule; one
// AttachSource refuses gets no rule, never a wider one.
func TestASourceSetAfterResolveIsFencedTheSameWay(t *testing.T) {
	rc, err := LoadConfig("tau.yaml", []byte("schema_version: 1\nentrypoint: a.py\nruntime: {image: python:3}\npolicy: {profile: cpu-deny}\n"))
	if err != nil {
		t.Fatal(err)
	}
	run := testRun
	run.Source = nil
	tests := map[string]struct {
		url           string
		reachesSource bool
		attachRefuses bool
	}{
		"the controller's Service":      {url: testRun.Source.URL, reachesSource: true},
		"a name outside the cluster":    {url: "https://tau.example.com/source/x.tar.gz", attachRefuses: true},
		"a Service in a tenant's space": {url: "http://tau-controller.team-b.svc:8265/source/x.tar.gz", attachRefuses: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := Resolve(rc, egressPolicy(t, ""), "team-a", run)
			if err != nil {
				t.Fatal(err)
			}
			src := &SourceArchive{URL: tc.url, SHA256: testRun.Source.SHA256, Image: "ghcr.io/taugrid/tau"}
			if err := p.AttachSource(src); (err != nil) != tc.attachRefuses {
				t.Errorf("AttachSource: %v, want refused = %v", err, tc.attachRefuses)
			}
			p.Run.Source = src // as controllers/run does today
			objs := Render(p)
			for _, c := range containers(objs) {
				if c.Name == "tau-source" && c.Image != "ghcr.io/taugrid/tau:latest" {
					t.Errorf("fetch image %q, want ghcr.io/taugrid/tau:latest", c.Image)
				}
			}
			np := objs[len(objs)-1].(*networkingv1.NetworkPolicy)
			if got := egressAdmits(t, np, destinations["the source server"]); got != tc.reachesSource {
				t.Errorf("reaches the source server: %v, want %v", got, tc.reachesSource)
			}
			for _, d := range []string{"tenant B's Ray dashboard", "an address on the internet", "tenant B's pod on the source port"} {
				if egressAdmits(t, np, destinations[d]) {
					t.Errorf("reaches %s", d)
				}
			}
		})
	}
}

// The fence of a cluster tenant on a cluster profile, as the API server
// gets it.
func TestAClusterFenceRendersGolden(t *testing.T) {
	objs, err := renderWith(egressPolicy(t, collectorEgress), "schema_version: 1\nentrypoint: a.py\nruntime: {image: python:3}\npolicy: {profile: cpu-cluster}\n")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Marshal(objs[len(objs)-1:], FormatYAML)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "testdata/golden/egress-cluster-networkpolicy.yaml", out)
}
