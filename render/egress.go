package render

import (
	"fmt"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Egress is where a run's pods may open connections to. A tenant and a
// profile may each choose one; the stricter applies (see resolveEgress).
type Egress string

// The egress choices, strictest first.
const (
	// EgressDeny lets the pods reach only what every run needs: the
	// cluster DNS, the pods of their own run and the source server.
	EgressDeny Egress = "deny"
	// EgressCluster adds the in-cluster destinations the platform names in
	// egress_to, which may never be a tenant's namespace.
	EgressCluster Egress = "cluster"
	// EgressOpen renders no egress rule: the pods reach whatever the
	// cluster's other policies allow, everything on most clusters. The
	// default, as before egress could be chosen.
	EgressOpen Egress = "open"
)

// strictness orders the choices; unset is open.
func (e Egress) strictness() int {
	switch e {
	case EgressDeny:
		return 0
	case EgressCluster:
		return 1
	}
	return 2
}

// The cluster DNS every fenced run may ask: CoreDNS (or kube-dns) pods in
// kube-system, selected by the namespace's immutable name label so that
// no tenant can label a pod of its own k8s-app=kube-dns and receive other
// runs' queries.
const (
	dnsNamespace = "kube-system"
	dnsLabel     = "k8s-app"
	dnsApp       = "kube-dns"
	dnsPort      = 53
)

// resolveEgress is a run's egress: the stricter of its tenant's and its
// profile's, so that neither can open what the other closes; under cluster,
// the destinations of each side that chose cluster.
func resolveEgress(t *Tenant, pr *Profile) (Egress, []networkingv1.NetworkPolicyEgressRule) {
	mode := EgressOpen
	for _, e := range []Egress{t.Egress, pr.Egress} {
		if e != "" && e.strictness() < mode.strictness() {
			mode = e
		}
	}
	if mode != EgressCluster {
		return mode, nil
	}
	var to []networkingv1.NetworkPolicyEgressRule
	if t.Egress == EgressCluster {
		to = append(to, t.EgressTo...)
	}
	if pr.Egress == EgressCluster {
		to = append(to, pr.EgressTo...)
	}
	return mode, to
}

// egressRules are a fenced run's egress rules: the DNS, the run's own pods,
// the source server, then the platform's named destinations.
func (p *Plan) egressRules(sameRun metav1.LabelSelector) []networkingv1.NetworkPolicyEgressRule {
	rules := []networkingv1.NetworkPolicyEgressRule{dnsEgress(), {To: []networkingv1.NetworkPolicyPeer{{PodSelector: &sameRun}}}}
	// A source AttachSource would refuse, set on the plan directly, gets
	// no rule: its pods then cannot fetch, rather than the fence a hole.
	if src := p.Run.Source; src != nil {
		if rule, err := p.sourceRule(src.URL); err == nil {
			rules = append(rules, *rule)
		}
	}
	for _, r := range p.EgressTo {
		rules = append(rules, *r.DeepCopy())
	}
	return rules
}

func dnsEgress() networkingv1.NetworkPolicyEgressRule {
	udp, tcp := corev1.ProtocolUDP, corev1.ProtocolTCP
	port := intstr.FromInt32(dnsPort)
	return networkingv1.NetworkPolicyEgressRule{
		To: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: nameSelector(dnsNamespace),
			PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{dnsLabel: dnsApp}},
		}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: &port}, {Protocol: &tcp, Port: &port}},
	}
}

// nameSelector selects a namespace by its name label, which the API server
// sets and no tenant can change.
func nameSelector(namespace string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: namespace}}
}

// sourceEgress is the rule that lets a run's init container reach the
// source server, read from the archive's URL: a cluster Service name
// (<service>.<namespace>.svc[.<cluster domain>]) admits the pods of that
// namespace, an IP address itself, on the URL's port. A network plugin
// judges egress after a Service's address is translated to its pod's, so
// the port must be the server pod's own (the chart makes them equal).
func sourceEgress(raw string) (*networkingv1.NetworkPolicyEgressRule, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, "", err
	}
	port, err := strconv.Atoi(u.Port())
	switch {
	case u.Port() == "" && u.Scheme == "https":
		port = 443
	case u.Port() == "":
		port = 80
	case err != nil || port < 1 || port > 65535:
		return nil, "", fmt.Errorf("port %q is not a port number", u.Port())
	}
	var peer networkingv1.NetworkPolicyPeer
	namespace := ""
	if addr, err := netip.ParseAddr(u.Hostname()); err == nil {
		peer.IPBlock = &networkingv1.IPBlock{CIDR: netip.PrefixFrom(addr, addr.BitLen()).String()}
	} else if parts := strings.Split(u.Hostname(), "."); len(parts) >= 3 && parts[2] == "svc" && len(validation.IsDNS1123Label(parts[1])) == 0 {
		namespace = parts[1]
		peer.NamespaceSelector = nameSelector(namespace)
	} else {
		return nil, "", fmt.Errorf("%q is neither a cluster Service (<service>.<namespace>.svc) nor an IP address", u.Hostname())
	}
	tcp, p := corev1.ProtocolTCP, intstr.FromInt32(int32(port))
	return &networkingv1.NetworkPolicyEgressRule{To: []networkingv1.NetworkPolicyPeer{peer},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p}}}, namespace, nil
}

// AttachSource sets the archive the attempt's pods fetch their source
// from (nil: no fetch step). Its fetch image is written out as the run's
// own is (qualifyImage). When the run's egress is fenced, the source
// server must be one the fence can admit (sourceEgress) and in no tenant's
// namespace, which the fence would open to every fenced run; that is the
// platform's to fix, so the error names no tau.yaml field. src itself is
// left as it was.
func (p *Plan) AttachSource(src *SourceArchive) error {
	if src == nil {
		p.Run.Source = nil
		return nil
	}
	ref, err := qualifyImage(src.Image)
	if err != nil {
		return fmt.Errorf("the source fetch image %q (tau-controller --fetch-image) is not a valid image reference: %w", src.Image, err)
	}
	if p.fenced() {
		if _, err := p.sourceRule(src.URL); err != nil {
			return err
		}
	}
	out := *src
	out.Image = ref.String()
	p.Run.Source = &out
	return nil
}

// fenced reports whether the run's egress is closed to what its rules name.
func (p *Plan) fenced() bool { return p.Egress != "" && p.Egress != EgressOpen }

// sourceRule is the egress rule to the source server at url.
func (p *Plan) sourceRule(raw string) (*networkingv1.NetworkPolicyEgressRule, error) {
	rule, ns, err := sourceEgress(raw)
	if err != nil {
		return nil, fmt.Errorf("egress %s: the run's pods could not fetch their source: the source server's URL %s: %w; the platform team sets it (tau-controller --source-url)",
			p.Egress, raw, err)
	}
	if tenant, ok := p.tenantNamespaces[ns]; ok && ns != "" {
		return nil, fmt.Errorf("egress %s: the source server's URL %s is in tenant %s's namespace; fencing runs to it would let them reach that tenant's pods",
			p.Egress, raw, tenant)
	}
	return rule, nil
}

// validateEgress checks one tenant's or profile's egress keys; at is its
// path, such as profiles[2].
func validateEgress(c *checker, at string, mode Egress, to []networkingv1.NetworkPolicyEgressRule, tenants []Tenant) {
	switch mode {
	case "", EgressDeny, EgressOpen:
		if len(to) > 0 {
			c.errorf(at+".egress_to", "used only with `egress: cluster`; here egress is %s", orOpen(mode))
			return
		}
	case EgressCluster:
		if len(to) == 0 {
			c.errorf(at+".egress", "cluster needs egress_to: the in-cluster destinations runs may reach (with none, write deny)")
		}
	default:
		c.errorf(at+".egress", "unknown egress %q; expected deny, cluster or open", mode)
	}
	for i, rule := range to {
		r := fmt.Sprintf("%s.egress_to[%d]", at, i)
		if len(rule.To) == 0 {
			c.errorf(r, "names no destination (to): a rule without one admits every address, other tenants' pods included; for that, write `egress: open`")
		}
		for j, peer := range rule.To {
			checkEgressPeer(c, fmt.Sprintf("%s.to[%d]", r, j), peer, tenants)
		}
		for j, port := range rule.Ports {
			checkEgressPort(c, fmt.Sprintf("%s.ports[%d]", r, j), port)
		}
	}
}

func orOpen(e Egress) Egress {
	if e == "" {
		return EgressOpen
	}
	return e
}

// checkEgressPeer refuses a destination that would let a run reach
// strangers: every namespace, a tenant's namespace, every address.
func checkEgressPeer(c *checker, at string, peer networkingv1.NetworkPolicyPeer, tenants []Tenant) {
	switch {
	case peer.IPBlock != nil && (peer.NamespaceSelector != nil || peer.PodSelector != nil):
		c.errorf(at, "ipBlock cannot be combined with a selector; write them as two destinations")
	case peer.IPBlock != nil:
		checkIPBlock(c, at+".ipBlock", peer.IPBlock)
	case peer.NamespaceSelector == nil && peer.PodSelector == nil:
		c.errorf(at, "names no destination: give a namespaceSelector (with a podSelector to narrow it) or an ipBlock")
	}
	if peer.PodSelector != nil {
		checkSelector(c, at+".podSelector", peer.PodSelector)
	}
	if peer.NamespaceSelector != nil && checkSelector(c, at+".namespaceSelector", peer.NamespaceSelector) {
		checkNotTenants(c, at+".namespaceSelector", peer.NamespaceSelector, tenants)
	}
}

func checkSelector(c *checker, at string, s *metav1.LabelSelector) bool {
	if _, err := metav1.LabelSelectorAsSelector(s); err != nil {
		c.errorf(at, "invalid label selector: %v", err)
		return false
	}
	return true
}

// checkNotTenants refuses a namespace selector that selects every
// namespace, or a tenant's as the cluster labels it (by name).
func checkNotTenants(c *checker, at string, s *metav1.LabelSelector, tenants []Tenant) {
	if len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		c.errorf(at, "{} selects every namespace, other tenants' included; select the destination's namespace, such as by kubernetes.io/metadata.name")
		return
	}
	sel, _ := metav1.LabelSelectorAsSelector(s)
	for _, t := range tenants {
		if sel.Matches(labels.Set{corev1.LabelMetadataName: t.Namespace}) {
			c.errorf(at, "selects tenant %s's namespace %s; tenants' runs never reach each other (a podSelector alone selects the run's own namespace)", t.Name, t.Namespace)
			return
		}
	}
}

func checkIPBlock(c *checker, at string, b *networkingv1.IPBlock) {
	cidr, err := netip.ParsePrefix(b.CIDR)
	switch {
	case err != nil:
		c.errorf(at+".cidr", "invalid CIDR %q, such as 10.96.0.0/12", b.CIDR)
		return
	case cidr.Bits() == 0:
		c.errorf(at+".cidr", "%s is every address, other tenants' pods included; for that, write `egress: open`", b.CIDR)
		return
	}
	for k, e := range b.Except {
		if ex, err := netip.ParsePrefix(e); err != nil || !cidr.Contains(ex.Addr()) || ex.Bits() < cidr.Bits() {
			c.errorf(fmt.Sprintf("%s.except[%d]", at, k), "%q is not a CIDR inside %s", e, b.CIDR)
		}
	}
}

func checkEgressPort(c *checker, at string, p networkingv1.NetworkPolicyPort) {
	if pr := p.Protocol; pr != nil && *pr != corev1.ProtocolTCP && *pr != corev1.ProtocolUDP && *pr != corev1.ProtocolSCTP {
		c.errorf(at+".protocol", "unknown protocol %q; expected TCP, UDP or SCTP", *pr)
	}
	switch {
	case p.Port == nil:
		if p.EndPort != nil {
			c.errorf(at+".endPort", "needs a numeric port to start the range")
		}
	case p.Port.Type == intstr.String:
		if len(validation.IsValidPortName(p.Port.StrVal)) > 0 {
			c.errorf(at+".port", "%q is neither a port number nor a port name", p.Port.StrVal)
		} else if p.EndPort != nil {
			c.errorf(at+".endPort", "needs a numeric port to start the range, not %q", p.Port.StrVal)
		}
	case p.Port.IntVal < 1 || p.Port.IntVal > 65535:
		c.errorf(at+".port", "must be between 1 and 65535, got %d", p.Port.IntVal)
	case p.EndPort != nil && (*p.EndPort < p.Port.IntVal || *p.EndPort > 65535):
		c.errorf(at+".endPort", "must be between port (%d) and 65535, got %d", p.Port.IntVal, *p.EndPort)
	}
}
