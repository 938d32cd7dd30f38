package images

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"helm.sh/helm/v3/pkg/action"
	chartloader "helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/registry"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/taugrid/taugrid/hack/images/imagebuild"
	"github.com/taugrid/taugrid/test/chart"
	"github.com/taugrid/taugrid/test/controlplane"
)

// TestAPublishedReleaseIsVerifiedByCosignAndInstalledByHelm is a platform
// team's install, from a registry, with the tools they trust: make publish
// pushes both platforms' images and the chart to a real registry
// (distribution), the real cosign verifies every image's signature,
// provenance and SPDX SBOM (which describes the image by name, tag and
// digest) and the chart's signature with the release's public key and
// refuses a tampered image, a tampered chart, an SBOM changed or signed
// with another key, and another key; Helm installs
// the chart from oci:// into a real API server, and the workloads it
// creates name the pushed images by digest; podman pulls the tau image and
// runs tau version.
func TestAPublishedReleaseIsVerifiedByCosignAndInstalledByHelm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and pushes the images and runs the control plane; run without -short")
	}
	cosign, server := tool(t, "TAU_COSIGN", "make cosign"), tool(t, "TAU_REGISTRY_SERVER", "make registry-server")
	p := needPodman(t)
	reg := startRegistry(t, server)
	const tag, version = "v0.0.0-release-test", "0.0.0-release-test"
	repo := reg + "/taugrid"
	keyFile, pub, otherPub := releaseKeys(t)

	out := emptyDir(t)
	start := time.Now()
	publish := exec.Command("make", "--no-print-directory", "publish", "REGISTRY="+repo, "IMAGE_TAG="+tag,
		"IMAGE_OUT="+out, "IMAGE_PLATFORMS=linux/amd64,linux/arm64", "IMAGE_BUILD_FLAGS=--allow-dirty")
	publish.Dir = root
	publish.Env = append(os.Environ(), "TAU_IMAGE_SIGNING_KEY="+keyFile)
	log, err := publish.CombinedOutput()
	if err != nil {
		t.Fatalf("make publish: %v\n%s", err, log)
	}
	t.Logf("make publish took %s:\n%s", time.Since(start).Round(time.Second), log)
	pushed := summary(t, out)

	// cosign verifies what was pushed, by digest, with only the public key.
	verify := func(args ...string) (string, error) { return runCosign(t, cosign, args...) }
	for img, digest := range pushed {
		ref := repo + "/" + img + "@" + digest
		if o, err := verify("verify", "--key", pub, ref); err != nil {
			t.Errorf("cosign verify %s: %v\n%s", ref, err, o)
		}
		o, err := verify("verify-attestation", "--key", pub, "--type", "slsaprovenance1", ref)
		if err != nil {
			t.Errorf("cosign verify-attestation %s: %v\n%s", ref, err, o)
		} else if pt := predicateType(t, o); pt != "https://slsa.dev/provenance/v1" {
			t.Errorf("cosign verified %s's attestation of predicate %q, want SLSA provenance v1", ref, pt)
		}
		o, err = verify("verify-attestation", "--key", pub, "--type", "spdxjson", ref)
		if err != nil {
			t.Errorf("cosign verify-attestation --type spdxjson %s: %v\n%s", ref, err, o)
		} else {
			checkSBOM(t, img, tag, digest, statementOf(t, o))
		}
	}
	chartRef := repo + "/taugrid:" + version
	if o, err := verify("verify", "--key", pub, chartRef); err != nil {
		t.Errorf("cosign verify %s (the chart): %v\n%s", chartRef, err, o)
	}

	// Helm installs the chart from the registry; what it creates names the
	// pushed images by digest.
	env := controlplane.ForTest(t, controlplane.Options{})
	helmInstall(t, env, "oci://"+repo+"/taugrid", version)
	want := func(img string) string { return repo + "/" + img + "@" + pushed[img] }
	var d appsv1.Deployment
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: chart.Namespace, Name: "tau-controller"}, &d); err != nil {
		t.Fatal(err)
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	if ctr.Image != want("tau-controller") {
		t.Errorf("the controller Deployment runs %s, want %s", ctr.Image, want("tau-controller"))
	}
	if args := strings.Join(ctr.Args, " "); !strings.Contains(args, want("tau")) {
		t.Errorf("the controller's arguments do not name the fetch image %s: %s", want("tau"), args)
	}
	var ds appsv1.DaemonSetList
	if err := env.Client.List(context.Background(), &ds, client.InNamespace(chart.Namespace)); err != nil || len(ds.Items) == 0 {
		t.Fatalf("the chart installed no node agent DaemonSet: %v", err)
	}
	if got := ds.Items[0].Spec.Template.Spec.Containers[0].Image; got != want("tau-nodeagent") {
		t.Errorf("the node agent DaemonSet runs %s, want %s", got, want("tau-nodeagent"))
	}

	// podman pulls tau from the registry, for this machine's platform.
	p.must("pull", "--quiet", "--tls-verify=false", repo+"/tau:"+tag)
	v := p.must("run", "--rm", "--network=none", "--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", want("tau"), "version")
	if !strings.Contains(v, tag) {
		t.Errorf("tau version in the pulled image says %q, want %s", v, tag)
	}

	// Tampering: another image under the controller's tag, another chart
	// under the chart's version, another key. cosign refuses each.
	refused := func(what, want string, args ...string) {
		t.Helper()
		o, err := verify(args...)
		if err == nil || !strings.Contains(o, want) {
			t.Errorf("cosign %s: %v, want a refusal saying %q:\n%s", what, err, want, o)
		}
	}
	retag(t, repo+"/tau@"+pushed["tau"], repo+"/tau-controller:"+tag)
	refused("verify of another image pushed under the controller's tag", "no signatures found",
		"verify", "--key", pub, repo+"/tau-controller:"+tag)
	tamperChart(t, repo, version)
	refused("verify of a changed chart pushed under "+chartRef, "no signatures found", "verify", "--key", pub, chartRef)
	refused("verify of the tau image with another key", "no matching signatures",
		"verify", "--key", otherPub, repo+"/tau@"+pushed["tau"])
	refused("verify-attestation of the tau image with another key", "no matching attestations",
		"verify-attestation", "--key", otherPub, "--type", "slsaprovenance1", repo+"/tau@"+pushed["tau"])
	// An SBOM changed after signing (hiding a module, say), or signed with
	// another key: cosign trusts the provenance beside it and no SBOM.
	tauRef := repo + "/tau@" + pushed["tau"]
	hide := func(statement []byte) []byte {
		return []byte(strings.Replace(string(statement), `"name":"github.com/spf13/cobra"`, `"name":"github.com/spf13/cobra-hidden"`, 1))
	}
	other, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for what, reseal := range map[string]func(env imagebuild.Envelope, statement []byte) []byte{
		"changed after signing": func(env imagebuild.Envelope, statement []byte) []byte {
			env.Payload = base64.StdEncoding.EncodeToString(hide(statement))
			data, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			return data
		},
		"signed with another key": func(_ imagebuild.Envelope, statement []byte) []byte {
			data, err := imagebuild.SignEnvelope(other, hide(statement))
			if err != nil {
				t.Fatal(err)
			}
			return data
		},
	} {
		restore := replaceSBOM(t, repo+"/tau", pushed["tau"], reseal)
		refused("verify-attestation --type spdxjson of the tau image with an SBOM "+what,
			"none of the attestations matched the predicate type: spdxjson, found: https://slsa.dev/provenance/v1",
			"verify-attestation", "--key", pub, "--type", "spdxjson", tauRef)
		restore()
	}
	refused("verify-attestation --type spdxjson of the tau image with another key", "no matching attestations",
		"verify-attestation", "--key", otherPub, "--type", "spdxjson", tauRef)
	t.Logf("the release test took %s", time.Since(start).Round(time.Second))
}

// tool is the path a make target built, from env; missing, the test
// fails under CI=true and is skipped elsewhere.
func tool(t *testing.T, env, target string) string {
	t.Helper()
	if bin := os.Getenv(env); bin != "" {
		return bin
	}
	why := env + " is not set: run make test, or " + target + " and set " + env + " to the path it prints"
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
	return ""
}

// startRegistry starts the real registry (distribution) on loopback,
// storing into the test's directory; it returns host:port.
func startRegistry(t *testing.T, bin string) string {
	t.Helper()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	config := fmt.Sprintf("version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: %s\nhttp:\n  addr: %s\n",
		filepath.Join(dir, "data"), addr)
	cfg := filepath.Join(dir, "config.yml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", cfg)
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(logFile.Name())
			t.Logf("registry log:\n%s", b)
		}
	})
	waitFor(t, 30*time.Second, "the registry answering", func() (bool, string) { return httpOK("http://" + addr + "/v2/") })
	return addr
}

// releaseKeys writes the release's signing key and its public key, and
// another public key.
func releaseKeys(t *testing.T) (keyFile, pub, other string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var pubs []string
	for i, n := range []string{"release", "other"} {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			der, _ := x509.MarshalPKCS8PrivateKey(k)
			keyFile = write(n+".key", "PRIVATE KEY", der)
		}
		der, _ := x509.MarshalPKIXPublicKey(&k.PublicKey)
		pubs = append(pubs, write(n+".pub", "PUBLIC KEY", der))
	}
	return keyFile, pubs[0], pubs[1]
}

// summary is make images' images.json: each image's index digest.
func summary(t *testing.T, out string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(out, "images.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s []imagebuild.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	digests := map[string]string{}
	for _, img := range s {
		if len(img.Platforms) != 2 {
			t.Errorf("%s holds %d platforms, want linux/amd64 and linux/arm64", img.Image, len(img.Platforms))
		}
		digests[img.Image[strings.LastIndex(img.Image, "/")+1:strings.LastIndex(img.Image, ":")]] = img.Digest
		for _, p := range img.Platforms {
			t.Logf("%s %s: %.1f MB compressed", img.Image, p.Platform, float64(p.Bytes)/1e6)
		}
	}
	if len(digests) != 3 {
		t.Fatalf("images.json lists %v, want tau-controller, tau-nodeagent and tau", digests)
	}
	return digests
}

// runCosign runs the real cosign offline but for the loopback registry:
// the public key, no transparency log, no home but its own.
func runCosign(t *testing.T, bin string, args ...string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	args = append(args, "--insecure-ignore-tlog=true", "--allow-http-registry=true")
	cmd := exec.Command(bin, args...)
	cmd.Env = []string{"HOME=" + dir, "TUF_ROOT=" + filepath.Join(dir, "tuf"), "SIGSTORE_NO_CACHE=1", "PATH=/nonexistent",
		"HTTPS_PROXY=http://127.0.0.1:9", "HTTP_PROXY=http://127.0.0.1:9", "NO_PROXY=127.0.0.1"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// helmInstall installs the chart at ref (oci://) and version into env as
// `helm install taugrid ref --version version -n taugrid-system
// --create-namespace` does, with Helm's own SDK and registry client.
func helmInstall(t *testing.T, env *controlplane.Env, ref, version string) {
	t.Helper()
	home := t.TempDir()
	settings := cli.New()
	settings.RepositoryCache = filepath.Join(home, "cache")
	settings.RegistryConfig = filepath.Join(home, "registry.json")
	settings.RepositoryConfig = filepath.Join(home, "repositories.yaml")
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptCredentialsFile(settings.RegistryConfig))
	if err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &env.Kubeconfig
	ns := chart.Namespace
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	if err := cfg.Init(flags, ns, "secret", t.Logf); err != nil {
		t.Fatal(err)
	}
	cfg.RegistryClient = rc
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace, install.Version = "taugrid", ns, true, version
	install.SetRegistryClient(rc)
	path, err := install.LocateChart(ref, settings)
	if err != nil {
		t.Fatalf("helm pulling %s --version %s: %v", ref, version, err)
	}
	c, err := chartloader.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := install.Run(c, nil)
	if err != nil {
		t.Fatalf("helm install %s --version %s: %v", ref, version, err)
	}
	t.Logf("helm installed %s %s: %s", rel.Chart.Name(), rel.Chart.Metadata.Version, rel.Info.Status)
}

// retag pushes the index at from under to, as someone with push rights to
// the registry could.
func retag(t *testing.T, from, to string) {
	t.Helper()
	src, err := name.ParseReference(from, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := name.NewTag(to, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(dst, idx); err != nil {
		t.Fatal(err)
	}
}

// tamperChart pushes a chart under version whose values name another
// controller image, as someone with push rights could.
func tamperChart(t *testing.T, repo, version string) {
	t.Helper()
	img := imagebuild.Pushed{Name: "tau-controller", Repo: "evil.example/tau-controller"}
	img.Digest.Algorithm, img.Digest.Hex = "sha256", strings.Repeat("e", 64)
	data, err := imagebuild.PackageChart(chart.Dir(), version, "v"+version, []imagebuild.Pushed{img}, imagebuild.Source{Time: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := registry.NewClient(registry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Push(data, repo+"/taugrid:"+version); err != nil {
		t.Fatal(err)
	}
}

// statementOf is the in-toto statement in the first DSSE envelope cosign
// verify-attestation printed.
func statementOf(t *testing.T, out string) []byte {
	t.Helper()
	i := strings.Index(out, `{"payloadType"`)
	if i < 0 {
		t.Fatalf("cosign printed no envelope:\n%s", out)
	}
	var env imagebuild.Envelope
	if err := json.NewDecoder(strings.NewReader(out[i:])).Decode(&env); err != nil {
		t.Fatal(err)
	}
	payload, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatal(err)
	}
	return payload
}

// predicateType is the predicate of the in-toto statement cosign
// verify-attestation printed.
func predicateType(t *testing.T, out string) string {
	t.Helper()
	var st struct {
		PredicateType string `json:"predicateType"`
	}
	if err := json.Unmarshal(statementOf(t, out), &st); err != nil {
		t.Fatal(err)
	}
	return st.PredicateType
}
