package chart

import (
	"strings"
	"testing"
)

// TestTheSchemaRefusesBadValuesNamingTheKey: each bad value fails the
// install with a message naming its path and what is wrong.
func TestTheSchemaRefusesBadValuesNamingTheKey(t *testing.T) {
	tests := map[string]struct {
		values string
		want   []string
	}{
		"a typo in a key": {
			values: "controller: {replica: 3}",
			want:   []string{"at '/controller'", "additional properties 'replica' not allowed"},
		},
		"an unknown top-level key": {
			values: "image: {tag: v1.0.0}",
			want:   []string{"additional properties 'image' not allowed"},
		},
		"the latest tag": {
			values: "controller: {image: {tag: latest}}",
			want:   []string{"at '/controller/image/tag'", "'latest' does not match pattern"},
		},
		"a tag on the node agent that is no version": {
			values: "nodeAgent: {image: {tag: main}}",
			want:   []string{"at '/nodeAgent/image/tag'", "does not match pattern"},
		},
		"a digest that is not sha256": {
			values: "fetchImage: {digest: 'md5:abc'}",
			want:   []string{"at '/fetchImage/digest'", "does not match pattern"},
		},
		"a pull policy that does not exist": {
			values: "controller: {image: {pullPolicy: Sometimes}}",
			want:   []string{"at '/controller/image/pullPolicy'", "value must be one of 'Always', 'IfNotPresent', 'Never'"},
		},
		"a cache kind that does not exist": {
			values: "controller: {cache: {type: hostPath}}",
			want:   []string{"at '/controller/cache/type'", "value must be one of 'emptyDir', 'pvc'"},
		},
		"zero replicas": {
			values: "controller: {replicas: 0}",
			want:   []string{"at '/controller/replicas'", "minimum: got 0, want 1"},
		},
		"a metrics reader that is no RBAC subject": {
			values: "metrics: {readers: [{kind: Pod, name: prometheus-0}]}",
			want:   []string{"at '/metrics/readers/0/kind'", "value must be one of 'ServiceAccount', 'User', 'Group'"},
		},
		"a metrics reader without a name": {
			values: "metrics: {readers: [{kind: ServiceAccount, namespace: monitoring}]}",
			want:   []string{"at '/metrics/readers/0'", "missing property 'name'"},
		},
		"a port as a string": {
			values: "ports: {webhook: '9292'}",
			want:   []string{"at '/ports/webhook'", "got string, want integer"},
		},
		"a port out of range": {
			values: "ports: {metrics: 70000}",
			want:   []string{"at '/ports/metrics'", "maximum: got 70,000, want 65,535"},
		},
		"an inline secret instead of a Secret's name": {
			values: "evidence: {storage: {s3: {accessKey: AKIA...}}}",
			want:   []string{"at '/evidence/storage/s3'", "additional properties 'accessKey' not allowed"},
		},
		"s3 evidence without a bucket": {
			values: "evidence: {enabled: true, storage: {type: s3, s3: {endpoint: 'https://s3.example.com', existingSecret: s3}}}",
			want:   []string{"at '/evidence/storage/s3/bucket'", "minLength: got 0, want 1"},
		},
		"a platform without a URL": {
			values: "platform: {create: true}",
			want:   []string{"at '/platform/url'", "minLength: got 0, want 1"},
		},
		"a platform URL that is not git": {
			values: "platform: {create: true, url: 'git@github.com:example/platform.git'}",
			want:   []string{"at '/platform/url'", "does not match pattern"},
		},
		"an ingress without a host": {
			values: "ingress: {enabled: true}",
			want:   []string{"at '/ingress/host'", "minLength: got 0, want 1"},
		},
		"a scrape interval without a unit": {
			values: "metrics: {serviceMonitor: {interval: 30}}",
			want:   []string{"at '/metrics/serviceMonitor/interval'", "got number, want string"},
		},
		"an extra argument that is no flag": {
			values: "controller: {extraArgs: ['leader-elect']}",
			want:   []string{"at '/controller/extraArgs/0'", "does not match pattern"},
		},
		"several replicas without leader election": {
			values: "controller: {replicas: 2, leaderElect: false}",
			want:   []string{"at '/controller/leaderElect'", "value must be true"},
		},
		"a MultiKueue namespace that is no namespace name": {
			values: "controller: {multiKueueNamespace: Kueue_System}",
			want:   []string{"at '/controller/multiKueueNamespace'", "does not match pattern"},
		},
		"a log level zap does not know": {
			values: "controller: {logLevel: verbose}",
			want:   []string{"at '/controller/logLevel'", "value must be one of 'debug', 'info', 'error'"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Render(Namespace, mustYAML(tc.values))
			if err == nil {
				t.Fatalf("%s: rendered, want it refused", tc.values)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%s: error lacks %q:\n%v", tc.values, w, err)
				}
			}
		})
	}
}
