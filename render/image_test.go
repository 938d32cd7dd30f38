package render

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var (
	fakeDigest  = "sha256:" + strings.Repeat("ab", 32)
	otherDigest = "sha256:" + strings.Repeat("cd", 32)
)

// imagePolicy is the example policy with an allow-list for image attacks:
// Docker Hub's pytorch and library/ubuntu, a registry, and a registry's
// repository.
func imagePolicy(t *testing.T, requireDigest bool) *Policy {
	t.Helper()
	pol := examplePolicy(t)
	pol.Images = ImagePolicy{Allow: []string{"docker.io/pytorch", "docker.io/library/ubuntu", "registry.allowed.com", "ghcr.io/taugrid"},
		RequireDigest: requireDigest}
	return pol
}

// containers are every container of every pod a render writes.
func containers(objs []client.Object) []corev1.Container {
	var out []corev1.Container
	for _, tmpl := range podTemplates(objs[0]) {
		out = slices.Concat(out, tmpl.Spec.InitContainers, tmpl.Spec.Containers)
	}
	return out
}

// From the attacker's side: a short name that another default registry
// (registries.conf's unqualified-search-registries) would resolve
// elsewhere reaches the pod only as the fully qualified name the
// allow-list judged, in every container of a Job and a RayJob; so does
// the platform's own fetch image.
func TestThePodRunsTheImageTheAllowListJudged(t *testing.T) {
	tests := map[string]struct {
		image, want string
		rayjob      bool
	}{
		"a short name is written out with docker.io":    {image: "pytorch/pytorch:2.4", want: "docker.io/pytorch/pytorch:2.4"},
		"an official image gets library/ and :latest":   {image: "ubuntu", want: "docker.io/library/ubuntu:latest"},
		"Docker Hub's legacy host is written docker.io": {image: "index.docker.io/pytorch/pytorch:2.4", want: "docker.io/pytorch/pytorch:2.4"},
		"a digest is kept":                                {image: "ubuntu@" + fakeDigest, want: "docker.io/library/ubuntu@" + fakeDigest},
		"a tag beside a digest gives way to it":           {image: "ubuntu:22.04@" + fakeDigest, want: "docker.io/library/ubuntu@" + fakeDigest},
		"every Ray pod gets it: head, workers, submitter": {image: "pytorch/pytorch:2.4", want: "docker.io/pytorch/pytorch:2.4", rayjob: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data := "schema_version: 1\nentrypoint: a.py\nruntime: {image: \"" + tc.image + "\"}\n"
			if tc.rayjob {
				data += "compute: {workers: 2}\npolicy: {profile: h200-8}\n"
			}
			rc, err := LoadConfig("tau.yaml", []byte(data))
			if err != nil {
				t.Fatal(err)
			}
			run := testRun
			run.Source = &SourceArchive{URL: testRun.Source.URL, SHA256: testRun.Source.SHA256, Image: "ghcr.io/taugrid/tau"}
			objs, err := RenderConfig(rc, imagePolicy(t, false), "team-a", run)
			if err != nil {
				t.Fatal(err)
			}
			var images []string
			for _, c := range containers(objs) {
				if c.Name != "tau-source" {
					images = append(images, c.Image)
				} else if c.Image != "ghcr.io/taugrid/tau:latest" {
					t.Errorf("the fetch image is %q, want it written out as ghcr.io/taugrid/tau:latest", c.Image)
				}
			}
			want := []string{tc.want}
			if tc.rayjob {
				want = []string{tc.want, tc.want, tc.want} // head, submitter, workers
			}
			if diff := cmp.Diff(want, images); diff != "" {
				t.Errorf("containers' images (-want +got):\n%s", diff)
			}
			if run.Source.Image != "ghcr.io/taugrid/tau" {
				t.Errorf("Resolve changed the caller's SourceArchive")
			}
		})
	}
}

// From the attacker's side: names that look like an allowed registry or
// repository, or that a node would read another way, are refused at
// runtime.image; so is an image that is not pinned, or falsely pinned,
// where the platform requires digests.
func TestLookalikeAndFalselyPinnedImagesAreRefused(t *testing.T) {
	notAllowed := func(full string) string {
		return `tau.yaml:3:18: runtime.image: image "` + full + `" is not allowed; the platform allows images from: docker.io/pytorch, docker.io/library/ubuntu, registry.allowed.com, ghcr.io/taugrid`
	}
	tests := map[string]struct {
		image         string
		requireDigest bool
		want          string
	}{
		"a registry whose name starts like docker.io": {image: "docker.io.evil.com/pytorch/pytorch:2.4",
			want: notAllowed("docker.io.evil.com/pytorch/pytorch:2.4")},
		"docker.io as a path on another registry": {image: "evil.com/docker.io/pytorch/pytorch:2.4",
			want: notAllowed("evil.com/docker.io/pytorch/pytorch:2.4")},
		"an allowed registry's name as a Docker Hub image with a tag": {image: "registry.allowed.com:443@" + fakeDigest,
			want: notAllowed("docker.io/library/registry.allowed.com@" + fakeDigest)},
		"an allowed registry on another port": {image: "registry.allowed.com:443/team/x:1",
			want: notAllowed("registry.allowed.com:443/team/x:1")},
		"an allowed registry's name as a subdomain of another": {image: "registry.allowed.com.evil/team/x:1",
			want: notAllowed("registry.allowed.com.evil/team/x:1")},
		"an allowed repository's name as a prefix of another": {image: "ghcr.io/taugrid-evil/x:1",
			want: notAllowed("ghcr.io/taugrid-evil/x:1")},
		"an allowed registry in capitals": {image: "Registry.Allowed.com/team/x:1",
			want: `tau.yaml:3:18: runtime.image: invalid image reference "Registry.Allowed.com/team/x:1": the registry "Registry.Allowed.com" must be written in lowercase (registry.allowed.com)`},
		"Docker Hub in capitals": {image: "DOCKER.IO/pytorch/pytorch:2.4",
			want: `tau.yaml:3:18: runtime.image: invalid image reference "DOCKER.IO/pytorch/pytorch:2.4": the registry "DOCKER.IO" must be written in lowercase (docker.io)`},
		"a repository in capitals": {image: "ghcr.io/TauGrid/x:1",
			want: `tau.yaml:3:18: runtime.image: invalid image reference "ghcr.io/TauGrid/x:1": invalid reference format: repository name (TauGrid/x) must be lowercase`},
		"a tag where a digest is required": {image: "ghcr.io/taugrid/x:1", requireDigest: true,
			want: `tau.yaml:3:18: runtime.image: image "ghcr.io/taugrid/x:1" must be pinned by digest (name@sha256:<64 hex digits>); the platform requires it`},
		"a tag that reads like a digest": {image: "ghcr.io/taugrid/x:sha256-" + strings.Repeat("ab", 32), requireDigest: true,
			want: `tau.yaml:3:18: runtime.image: image "ghcr.io/taugrid/x:sha256-` + strings.Repeat("ab", 32) + `" must be pinned by digest (name@sha256:<64 hex digits>); the platform requires it`},
		"a digest too short to pin anything": {image: "ghcr.io/taugrid/x:1@sha256:abc", requireDigest: true,
			want: `tau.yaml:3:18: runtime.image: invalid image reference "ghcr.io/taugrid/x:1@sha256:abc": invalid reference format (a digest is written @sha256: and 64 lowercase hex digits)`},
		"a digest in capitals": {image: "ghcr.io/taugrid/x@" + strings.ToUpper(fakeDigest), requireDigest: true,
			want: `tau.yaml:3:18: runtime.image: invalid image reference "ghcr.io/taugrid/x@SHA256:` + strings.Repeat("AB", 32) + `": invalid reference format: repository name (taugrid/x@SHA256) must be lowercase (a digest is written @sha256: and 64 lowercase hex digits)`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			data := "schema_version: 1\nentrypoint: a.py\nruntime: {image: \"" + tc.image + "\"}\n"
			objs, err := renderWith(imagePolicy(t, tc.requireDigest), data)
			checkOneError(t, objs, err, "tau.yaml")
			if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestAPinnedImagePassesADigestPolicy(t *testing.T) {
	for _, image := range []string{"ghcr.io/taugrid/x@" + fakeDigest, "ghcr.io/taugrid/x:1@" + otherDigest} {
		data := "schema_version: 1\nentrypoint: a.py\nruntime: {image: \"" + image + "\"}\n"
		if _, err := renderWith(imagePolicy(t, true), data); err != nil {
			t.Errorf("%s: %v", image, err)
		}
	}
}

// renderWith renders a tau.yaml for team-a under pol.
func renderWith(pol *Policy, data string) ([]client.Object, error) {
	rc, err := LoadConfig("tau.yaml", []byte(data))
	if err != nil {
		return nil, err
	}
	return RenderConfig(rc, pol, "team-a", testRun)
}
