package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ApplyDir server-side applies every YAML document of the *.yaml files in dir,
// files in name order and documents in file order (a Namespace before what it holds).
func ApplyDir(ctx context.Context, cl client.Client, fieldOwner, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no objects to apply: %s/*.yaml matches nothing", dir)
	}
	for _, file := range files {
		objs, err := readObjects(file)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			ac := client.ApplyConfigurationFromUnstructured(obj)
			if err := cl.Apply(ctx, ac, client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
				return fmt.Errorf("applying %s %s from %s: %w", obj.GetKind(), obj.GetName(), file, err)
			}
		}
	}
	return nil
}

// readObjects decodes the non-empty YAML documents of a file.
func readObjects(file string) ([]*unstructured.Unstructured, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		err := dec.Decode(&obj.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
		if len(obj.Object) > 0 {
			objs = append(objs, obj)
		}
	}
}
