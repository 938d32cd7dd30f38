package render

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"slices"

	"github.com/taugrid/taugrid/placement"
	"go.yaml.in/yaml/v3"
)

// kueueDir is the platform repo directory of Kueue objects; the renderer
// reads only its Topology and ResourceFlavor documents, for placement.
const kueueDir = "kueue"

// PlatformTopology is a Kueue Topology the platform repo declares, located
// for errors, with the ResourceFlavors that place pods by it.
type PlatformTopology struct {
	*placement.Topology
	File    string
	Line    int
	Flavors []*PlatformFlavor
}

// PlatformFlavor is a ResourceFlavor the platform repo declares.
type PlatformFlavor struct {
	Name       string
	Topology   string
	NodeLabels map[string]string
	File       string
	Line       int
}

// kueueDoc is the part of a Kueue document placement reads.
type kueueDoc struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Spec struct {
		Levels []struct {
			NodeLabel string `yaml:"nodeLabel"`
		} `yaml:"levels"`
		TopologyName string            `yaml:"topologyName"`
		NodeLabels   map[string]string `yaml:"nodeLabels"`
	} `yaml:"spec"`
}

// loadTopologies reads the Topology and ResourceFlavor documents under
// kueue/ and checks them as Kueue would, and more: hostname only lowest,
// level names tau.yaml can tell apart, a TAS flavor keeps nodeLabels and
// names a declared Topology. It returns the raw bytes of the files that
// declare a topology, for the policy digest.
func loadTopologies(fsys fs.FS) (map[string]*PlatformTopology, [][]byte, ErrorList) {
	files, _ := fs.Glob(fsys, kueueDir+"/*.yaml")
	slices.Sort(files)
	topologies := map[string]*PlatformTopology{}
	var flavors []*PlatformFlavor
	var digested [][]byte
	var errs ErrorList
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			errs = append(errs, &FieldError{File: f, Msg: err.Error()})
			continue
		}
		declares := false
		for doc, err := range kueueDocs(f, data) {
			if err != nil {
				errs = append(errs, err)
				break
			}
			switch doc.Kind {
			case "Topology":
				declares = true
				errs = append(errs, addTopology(topologies, f, doc)...)
			case "ResourceFlavor":
				flavors = append(flavors, &PlatformFlavor{Name: doc.Metadata.Name, Topology: doc.Spec.TopologyName,
					NodeLabels: doc.Spec.NodeLabels, File: f, Line: doc.line})
			}
		}
		if declares {
			digested = append(digested, data)
		}
	}
	return topologies, digested, append(errs, linkFlavors(topologies, flavors)...)
}

type locatedDoc struct {
	kueueDoc
	line int
}

// kueueDocs yields each document of a multi-document file with the line it
// starts on.
func kueueDocs(file string, data []byte) func(func(*locatedDoc, *FieldError) bool) {
	return func(yield func(*locatedDoc, *FieldError) bool) {
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for {
			var n yaml.Node
			err := dec.Decode(&n)
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				fe := Errors(syntaxError(file, err))
				if len(fe) == 0 {
					fe = []*FieldError{{File: file, Msg: err.Error()}}
				}
				yield(nil, fe[0])
				return
			}
			if len(n.Content) == 0 {
				continue
			}
			d := &locatedDoc{line: n.Content[0].Line}
			if err := n.Decode(&d.kueueDoc); err != nil {
				yield(nil, &FieldError{File: file, Line: d.line, Col: 1, Msg: err.Error()})
				return
			}
			if !yield(d, nil) {
				return
			}
		}
	}
}

func addTopology(ts map[string]*PlatformTopology, file string, d *locatedDoc) ErrorList {
	at := func(format string, args ...any) ErrorList {
		return ErrorList{{File: file, Line: d.line, Col: 1, Path: "Topology " + d.Metadata.Name, Msg: fmt.Sprintf(format, args...)}}
	}
	if prev, dup := ts[d.Metadata.Name]; dup {
		return at("declared twice (also at %s:%d)", prev.File, prev.Line)
	}
	labels := make([]string, len(d.Spec.Levels))
	for i, l := range d.Spec.Levels {
		labels[i] = l.NodeLabel
	}
	t, err := placement.NewTopology(d.Metadata.Name, labels)
	if err != nil {
		return at("spec.levels: %v", err)
	}
	ts[t.Name] = &PlatformTopology{Topology: t, File: file, Line: d.line}
	return nil
}

// linkFlavors attaches each TAS flavor to its Topology.
func linkFlavors(ts map[string]*PlatformTopology, flavors []*PlatformFlavor) ErrorList {
	var errs ErrorList
	for _, f := range flavors {
		if f.Topology == "" {
			continue
		}
		at := func(format string, args ...any) {
			errs = append(errs, &FieldError{File: f.File, Line: f.Line, Col: 1, Path: "ResourceFlavor " + f.Name, Msg: fmt.Sprintf(format, args...)})
		}
		t, ok := ts[f.Topology]
		switch {
		case !ok:
			at("spec.topologyName: no Topology %q is declared under %s/", f.Topology, kueueDir)
		case len(f.NodeLabels) == 0:
			at("spec.nodeLabels: required with spec.topologyName: Kueue places a TAS flavor's pods only on nodes it selects")
		default:
			t.Flavors = append(t.Flavors, f)
		}
	}
	return errs
}

// migProfileRE is an NVIDIA MIG profile name, such as 1g.18gb.
var migProfileRE = regexp.MustCompile(`^\d+g\.\d+gb$`)

// MIGResource is the extended resource of a MIG profile under the NVIDIA
// device plugin's mixed strategy: nvidia.com/mig-1g.18gb.
func MIGResource(profile string) string { return "nvidia.com/mig-" + profile }
