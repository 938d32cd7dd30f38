package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/taugrid/taugrid/test/controlplane"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// applyManifests server-side applies every YAML document in dir's *.yaml
// files, as the platform reconciler will.
func applyManifests(ctx context.Context, env *controlplane.Env, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(obj.Object) == 0 {
				continue
			}
			ac := client.ApplyConfigurationFromUnstructured(obj)
			if err := env.Client.Apply(ctx, ac, client.FieldOwner("taugrid-conformance"), client.ForceOwnership); err != nil {
				return fmt.Errorf("%s: applying %s %s: %w", f, obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}
