package handoff

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite schema/handoff-v1.json from the embedded schema")

// published is the copy of the schema served to the world.
var published = filepath.Join("..", "schema", "handoff-v1.json")

func TestPublishedSchemaMatchesEmbedded(t *testing.T) {
	t.Parallel()
	if *update {
		if err := os.WriteFile(published, schemaJSON, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(published)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, schemaJSON) {
		t.Fatalf("%s differs from handoff/handoff-v1.json: edit handoff/handoff-v1.json and run go test ./handoff -run TestPublishedSchema -update", published)
	}
	if !bytes.Equal(Schema(), schemaJSON) {
		t.Fatal("Schema() differs from the embedded schema")
	}
}

func TestSchemaDeclaresDraft2020AndID(t *testing.T) {
	t.Parallel()
	var s struct {
		Schema string `json:"$schema"`
		ID     string `json:"$id"`
	}
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		t.Fatal(err)
	}
	if s.Schema != "https://json-schema.org/draft/2020-12/schema" || s.ID != SchemaID {
		t.Fatalf("$schema %q, $id %q", s.Schema, s.ID)
	}
}

// The fast path must stay on for the embedded schema: Check's budget depends
// on it. If a schema change uses a keyword the fast path lacks, teach it the
// keyword (and FuzzFastPath will check the teaching).
func TestFastPathCoversSchema(t *testing.T) {
	t.Parallel()
	if newChecker(t).fast == nil {
		t.Fatal("the embedded schema uses a keyword the fast path does not implement")
	}
}

func TestExampleIsCompleteAndValid(t *testing.T) {
	t.Parallel()
	r, err := newChecker(t).Check(MediaType, Example(), Policy{MinCompleteness: 1}, "analyst")
	if err != nil || len(r.Violations) > 0 || r.Completeness != 1 {
		t.Fatalf("err %v, completeness %v, violations %+v", err, r.Completeness, r.Violations)
	}
	// Every member of the schema appears in the example.
	m := decode(t, Example())
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(schemaJSON, &s); err != nil {
		t.Fatal(err)
	}
	for name := range s.Properties {
		if _, ok := m[name]; !ok {
			t.Errorf("Example() lacks %s", name)
		}
	}
	// The Go types read it.
	var e Envelope
	if err := json.Unmarshal(Example(), &e); err != nil || e.Task.ID != "task-7f3a9c" || e.Provenance.Agent != "analyst" {
		t.Fatalf("Envelope: %v %+v", err, e)
	}
}

func TestDocsShowTheExample(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "envelope.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```json\n"+string(Example())+"```") {
		t.Fatal("docs/envelope.md does not show Example() verbatim in a json block: paste `baton envelope example` there")
	}
}
