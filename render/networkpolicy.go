package render

import (
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// networkPolicy fences an attempt's pods: they take connections only from
// pods of the same run (torchrun's rendezvous, the Ray head, its workers
// and its job submitter) and from what the run's profile lets in, so no
// other tenant's pod can reach a Ray dashboard or a rank's port. Unless the
// run's egress is open, the fence closes the other way too: the pods reach
// the cluster DNS, their own run, the source server and, under cluster,
// the platform's named destinations, and no other tenant's pods. Policies
// are enforced by the cluster's network plugin; without one they are
// inert objects.
func networkPolicy(p *Plan) *networkingv1.NetworkPolicy {
	name := WorkloadName(p.Run.Name, p.Run.Attempt)
	meta := p.objectMeta(name)
	delete(meta.Labels, LabelQueueName)
	delete(meta.Labels, LabelPriorityClass)
	sameRun := metav1.LabelSelector{MatchLabels: map[string]string{LabelRun: p.Run.Name}}
	from := []networkingv1.NetworkPolicyPeer{{PodSelector: &sameRun}}
	from = append(from, p.Profile.AllowIngressFrom...)
	np := &networkingv1.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
		ObjectMeta: meta,
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: sameRun,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: from}},
		},
	}
	// Open writes no egress rule rather than an allow-all one: policies
	// add up, and an allow-all would undo a default-deny the platform put
	// in the namespace itself.
	if p.fenced() {
		np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
		np.Spec.Egress = p.egressRules(*sameRun.DeepCopy())
	}
	return np
}
