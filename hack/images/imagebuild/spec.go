package imagebuild

import "fmt"

// UID and GID are the non-root user the images and the chart run as
// (distroless's "nonroot").
const (
	UID = 65532
	GID = 65532
)

// Spec is one image: which command it runs and what its root holds besides.
type Spec struct {
	Name    string // the image's repository name under the registry
	Package string // the Go package of its binary, from the module root
	// CGO: the binary links glibc (go-nvml loads libnvidia-ml.so.1 with
	// dlopen), so the image carries glibc.
	CGO bool
	// Dirs are empty directories owned by the user: the paths the chart
	// mounts volumes at, so the image also runs without them.
	Dirs        []string
	Description string
}

// Specs are the images `make images` builds, in the order the chart names
// them.
var Specs = []Spec{
	{Name: "tau-controller", Package: "./cmd/tau-controller", Dirs: []string{"/var/cache/taugrid", "/var/lib/taugrid/evidence"},
		Description: "TauGrid controller: git to Kueue workloads, source archives, the runs API"},
	{Name: "tau-nodeagent", Package: "./cmd/tau-nodeagent", CGO: true,
		Description: "TauGrid GPU node agent: NVML health checks, the node condition TauGPUHealthy and taint"},
	{Name: "tau", Package: "./cmd/tau",
		Description: "tau CLI: the fetch-source init container of run pods"},
}

// SpecNamed returns the spec of name.
func SpecNamed(name string) (Spec, error) {
	for _, s := range Specs {
		if s.Name == name {
			return s, nil
		}
	}
	return Spec{}, fmt.Errorf("no image named %q (have tau-controller, tau-nodeagent, tau)", name)
}

// Binary is the path of the image's command inside it.
func (s Spec) Binary() string { return "/usr/local/bin/" + s.Name }

// Platform is an OS/architecture pair the images are built for.
type Platform struct{ OS, Arch string }

func (p Platform) String() string { return p.OS + "/" + p.Arch }

// ParsePlatform reads "linux/amd64".
func ParsePlatform(s string) (Platform, error) {
	for i := range len(s) {
		if s[i] == '/' {
			p := Platform{OS: s[:i], Arch: s[i+1:]}
			if p.OS == "linux" && (p.Arch == "amd64" || p.Arch == "arm64") {
				return p, nil
			}
		}
	}
	return Platform{}, fmt.Errorf("platform %q: want linux/amd64 or linux/arm64", s)
}

// DefaultPlatforms are the platforms a release builds.
var DefaultPlatforms = []Platform{{"linux", "amd64"}, {"linux", "arm64"}}
