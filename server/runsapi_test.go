package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
	taugridv1 "github.com/taugrid/taugrid/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// TestAReadTheAPICannotServeIsAnswered5xxAndLogged: when the controller
// cannot read what a request asks for (here its client knows no TauRun
// kind), the researcher gets a 500 with a short message and the
// controller's log gets the cause.
func TestAReadTheAPICannotServeIsAnswered5xxAndLogged(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil { // Secrets, but no TauRuns
		t.Fatal(err)
	}
	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Namespace: "tau-system", Labels: map[string]string{taugridv1.LabelAPIToken: "true"}},
		Data: map[string][]byte{taugridv1.APITokenKey: []byte("tok-a"), taugridv1.APINamespaceKey: []byte("team-a")}}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(token).Build()
	var logged []string
	api := &RunsAPI{Client: c, Tokens: &Tokens{Reader: c, Namespace: "tau-system", Clock: clocktesting.NewFakePassiveClock(metav1.Now().Time)},
		Log: funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})}

	req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/team-a/runs", nil)
	req.Header.Set("Authorization", "Bearer tok-a")
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, req)

	if rec.Code != http.StatusInternalServerError || !strings.Contains(rec.Body.String(), "listing runs failed") {
		t.Errorf("answer %d %s, want 500 listing runs failed", rec.Code, rec.Body.String())
	}
	if len(logged) != 1 || !strings.Contains(logged[0], "TauRunList") || !strings.Contains(logged[0], `"status"=500`) {
		t.Errorf("logged %q, want one error naming the cause (no TauRunList kind) and the status", logged)
	}
}
