package handoff

import _ "embed"

// schemaJSON is the JSON Schema (draft 2020-12) of envelope v1. The copy
// published at schema/handoff-v1.json must hold the same bytes (a test checks
// it; go test ./handoff -run TestPublishedSchema -update rewrites it).
//
//go:embed handoff-v1.json
var schemaJSON []byte

// SchemaID is the $id of the v1 schema.
const SchemaID = "https://github.com/batonproxy/baton/blob/main/schema/handoff-v1.json"

// Schema returns the JSON Schema of envelope v1, as embedded in the binary.
func Schema() []byte { return append([]byte(nil), schemaJSON...) }
