package render

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// schemaVerdictRE reads the second header line of a corpus file: whether the
// JSON Schema alone rejects it ("rejects"), cannot tell because the check
// needs the policy or crosses fields ("accepts"), or never sees it because
// the file is not a single YAML document ("n/a").
var schemaVerdictRE = regexp.MustCompile(`(?m)^# schema: (rejects|accepts|n/a)$`)

func compileSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(SchemaJSON()))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(SchemaID, doc); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(SchemaID)
	if err != nil {
		t.Fatalf("the generated schema does not compile: %v", err)
	}
	return s
}

// schemaAccepts converts a YAML document to JSON and validates it.
func schemaAccepts(t *testing.T, s *jsonschema.Schema, data []byte) bool {
	t.Helper()
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		t.Fatalf("the file must parse for the schema to judge it: %v", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(inst) == nil
}

// TestSchemaAgreesWithValidator checks the JSON Schema against the validator
// on every corpus file: it accepts every valid file and every example, and
// rejects exactly the invalid files whose header says a schema can see the
// problem. The rest need the policy or a cross-field rule, which is the
// validator's job alone.
func TestSchemaAgreesWithValidator(t *testing.T) {
	s := compileSchema(t)
	valid, _ := filepath.Glob("testdata/valid/*.yaml")
	examples, _ := filepath.Glob("../examples/research/tau/*.yaml")
	valid = append(append(valid, "../examples/research/tau.yaml"), examples...)
	for _, path := range valid {
		data, _ := os.ReadFile(path)
		if !schemaAccepts(t, s, data) {
			t.Errorf("%s: the schema rejects a valid file", path)
		}
	}
	invalid, _ := filepath.Glob("testdata/invalid/*.yaml")
	counts := map[string]int{}
	for _, path := range invalid {
		data, _ := os.ReadFile(path)
		m := schemaVerdictRE.FindSubmatch(data)
		if m == nil {
			t.Errorf("%s: no '# schema: rejects|accepts|n/a' header", path)
			continue
		}
		verdict := string(m[1])
		counts[verdict]++
		if verdict == "n/a" {
			continue
		}
		if got := schemaAccepts(t, s, data); got != (verdict == "accepts") {
			t.Errorf("%s: schema accepts = %v, but the header says the schema %s it", path, got, verdict)
		}
	}
	t.Logf("invalid corpus: the schema rejects %d, needs the validator for %d, cannot parse %d", counts["rejects"], counts["accepts"], counts["n/a"])
}

func TestCommittedSchemaIsCurrent(t *testing.T) {
	committed, err := os.ReadFile("../docs/tau.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(SchemaJSON()), string(committed)); diff != "" {
		t.Errorf("docs/tau.schema.json is stale; run `make generate` (-generated +committed):\n%s", diff)
	}
}

func TestSchemaReservedEnvPatternMatchesValidator(t *testing.T) {
	re := regexp.MustCompile(envNamePattern)
	for _, name := range []string{"A", "T", "TA", "TAU", "TAU1", "TAUX_Y", "TA_U", "T_AU_", "HF_TOKEN", "_X", "TAU_", "TAU_RUN", "1A", "A-B", "Tau_x"} {
		c := &checker{file: "t", pos: positions{}}
		c.envName("env."+name, name)
		if validatorOK, schemaOK := len(c.errs) == 0, re.MatchString(name); validatorOK != schemaOK {
			t.Errorf("%q: validator accepts = %v, schema accepts = %v", name, validatorOK, schemaOK)
		}
	}
	rel := regexp.MustCompile(relPathPattern)
	for _, p := range []string{"a.py", "src/a.py", ".hidden/a", "..a", "a..", "./a", "../a", "a/../b", "a/..", "..", "/abs", `a\b`, "a/./b"} {
		c := &checker{file: "t", pos: positions{}}
		validatorOK := c.relPath("entrypoint", p, "root", true)
		if schemaOK := rel.MatchString(p); validatorOK != schemaOK {
			t.Errorf("%q: validator accepts = %v, schema accepts = %v", p, validatorOK, schemaOK)
		}
	}
}
