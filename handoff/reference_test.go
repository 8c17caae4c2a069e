package handoff_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/batonproxy/baton/handoff"
)

// TestArtifactsRoundTrip passes an A2A message's artifact by reference and
// back: the rest of the request stays, the reference carries the
// digest and size of the content's text, and inlining restores the content.
// Containers on the way to a change are written compactly; their values
// are kept.
func TestArtifactsRoundTrip(t *testing.T) {
	content := strings.Repeat("line \"quoted\" é\n", 100)
	quoted, _ := json.Marshal(content)
	body := `{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{"role":"user","messageId":"m1",
	  "parts":[{"kind":"text","text":"see attached"}],
	  "metadata":{"baton.handoff":{"schema_version":"1.0.0","task":{"id":"t","intent":"x"},
	    "artifacts":[ {"name":"log.txt", "content": ` + string(quoted) + `, "size": 3, "trust":"untrusted","source":"https://x.example"},
	                  {"name":"small","content":{"a":[1,2]},"trust":"trusted"} ]}}}}}`
	arts, err := handoff.ReadArtifacts("application/json", []byte(body))
	if err != nil || arts.Where != handoff.A2A || len(arts.Items) != 2 {
		t.Fatalf("ReadArtifacts: %v, %v, %d items", err, arts.Where, len(arts.Items))
	}
	it := &arts.Items[0]
	data, text, err := it.Data()
	if err != nil || !text || string(data) != content || it.Trust != "untrusted" || it.Size != 3 {
		t.Fatalf("Data: %v text=%v %d bytes, item %+v", err, text, len(data), it)
	}
	d := handoff.Digest(data)
	arts.ByReference(it, d, int64(len(data)), "0af7651916cd43dd8448eb211c80319c")
	out := arts.Bytes()

	var got, want map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("by reference: not JSON: %v\n%s", err, out)
	}
	_ = json.Unmarshal([]byte(body), &want)
	a := want["params"].(map[string]any)["message"].(map[string]any)["metadata"].(map[string]any)["baton.handoff"].(map[string]any)["artifacts"].([]any)[0].(map[string]any)
	delete(a, "content")
	a["ref"] = "/v1/context/" + d + "?trace=0af7651916cd43dd8448eb211c80319c"
	a["digest"], a["size"] = d, float64(len(data))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("by reference:\n got %s", out)
	}

	back, err := handoff.ReadArtifacts("application/json", out)
	if err != nil || len(back.Items) != 2 {
		t.Fatal(err)
	}
	if dd, ok := handoff.ParseContextRef(back.Items[0].Ref); !ok || dd != d || back.Items[0].Digest != d {
		t.Fatalf("ref %q digest %q, want %s", back.Items[0].Ref, back.Items[0].Digest, d)
	}
	back.Inline(&back.Items[0], data, true, d)
	var round map[string]any
	if err := json.Unmarshal(back.Bytes(), &round); err != nil {
		t.Fatal(err)
	}
	a = round["params"].(map[string]any)["message"].(map[string]any)["metadata"].(map[string]any)["baton.handoff"].(map[string]any)["artifacts"].([]any)[0].(map[string]any)
	if a["content"] != content || a["ref"] != nil || a["digest"] != d {
		t.Fatalf("inlined artifact %v", a)
	}
}

func TestValidDigest(t *testing.T) {
	for d, want := range map[string]bool{
		handoff.Digest([]byte("x")):          true,
		"sha-256:" + strings.Repeat("A", 64): false,
		"sha256:" + strings.Repeat("a", 64):  false,
		"sha-256:" + strings.Repeat("a", 63): false,
		"":                                   false,
	} {
		if handoff.ValidDigest(d) != want {
			t.Errorf("ValidDigest(%q) = %v", d, !want)
		}
	}
}
