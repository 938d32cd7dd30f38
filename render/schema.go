package render

import (
	"encoding/json"
	"reflect"

	"github.com/invopop/jsonschema"
	"k8s.io/apimachinery/pkg/api/resource"
)

// SchemaID identifies the tau.yaml v1 JSON Schema.
const SchemaID = "https://taugrid.dev/schemas/tau.v1.schema.json"

// Patterns shared by the schema and the validator's messages.
const (
	// quantityPattern is a non-negative Kubernetes resource quantity within
	// ParseQuantity's bounds.
	quantityPattern = `^\+?([0-9]{1,24}(\.[0-9]{0,24})?|\.[0-9]{1,24})(([KMGTPE]i)|[numkMGTPE]|([eE][+-]?[0-9]{1,2}))?$`
	// durationPattern is a Go duration string (time.ParseDuration).
	durationPattern = `^[+-]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$|^0$`
	// envNamePattern is an environment variable name outside TauGrid's
	// reserved TAU_ prefix, written without look-ahead so any engine runs it.
	envNamePattern = `^(?:[A-SU-Za-z_][A-Za-z0-9_]*|T|T[B-Za-z0-9_][A-Za-z0-9_]*|TA|TA[A-TV-Za-z0-9_][A-Za-z0-9_]*|TAU|TAU[A-Za-z0-9][A-Za-z0-9_]*)$`
	// relPathPattern is a relative path none of whose segments is "..".
	relPathPattern = `^(?:[^/.\\][^/\\]*|\.[^/.\\][^/\\]*|\.\.[^/\\]+|\.)(?:/(?:[^/.\\][^/\\]*|\.[^/.\\][^/\\]*|\.\.[^/\\]+|\.))*/?$`
	// secretRefPattern is "secret-name:key".
	secretRefPattern = `^[a-z0-9]([-a-z0-9.]*[a-z0-9])?:[-._a-zA-Z0-9]+$`
)

// Schema returns the JSON Schema (draft 2020-12) of tau.yaml v1, generated
// from the Go types so the two cannot drift apart.
func Schema() *jsonschema.Schema {
	r := &jsonschema.Reflector{
		DoNotReference:             true,
		RequiredFromJSONSchemaTags: true,
		Mapper:                     schemaMapper,
	}
	s := r.Reflect(&Config{})
	s.ID = SchemaID
	s.Title = "TauGrid run config (tau.yaml), schema version 1"
	return s
}

// SchemaJSON is Schema as indented JSON.
func SchemaJSON() []byte {
	b, err := json.MarshalIndent(Schema(), "", "  ")
	if err != nil {
		panic(err) // the schema is built from static types
	}
	return append(b, '\n')
}

func schemaMapper(t reflect.Type) *jsonschema.Schema {
	switch t {
	case reflect.TypeFor[resource.Quantity]():
		return &jsonschema.Schema{OneOf: []*jsonschema.Schema{
			{Type: "string", Pattern: quantityPattern},
			{Type: "number", ExclusiveMinimum: "0"},
		}, Description: "a Kubernetes quantity, such as 8, 500m or 64Gi"}
	case reflect.TypeFor[Duration]():
		return &jsonschema.Schema{Type: "string", Pattern: durationPattern, Description: "a duration, such as 90s, 30m or 12h"}
	}
	return nil
}

// JSONSchemaExtend adds what struct tags cannot say to the Runtime schema.
func (Runtime) JSONSchemaExtend(s *jsonschema.Schema) {
	envName := &jsonschema.Schema{Type: "string", Pattern: envNamePattern}
	if env, ok := s.Properties.Get("env"); ok {
		env.PropertyNames = envName
	}
	if env, ok := s.Properties.Get("env_secret"); ok {
		env.PropertyNames = envName
		env.AdditionalProperties = &jsonschema.Schema{Type: "string", Pattern: secretRefPattern}
	}
}

// JSONSchemaExtend constrains paths in the Config schema.
func (Config) JSONSchemaExtend(s *jsonschema.Schema) {
	if ep, ok := s.Properties.Get("entrypoint"); ok {
		ep.Pattern = relPathPattern
	}
}

// JSONSchemaExtend constrains paths on the data volume.
func (Storage) JSONSchemaExtend(s *jsonschema.Schema) {
	for _, f := range []string{"output", "checkpoint"} {
		if p, ok := s.Properties.Get(f); ok {
			p.Pattern = relPathPattern
		}
	}
}
