package middleware

import "testing"

func TestKindOf(t *testing.T) {
	for ct, want := range map[string]textKind{
		"application/json":                jsonText,
		"Application/JSON; charset=utf-8": jsonText,
		"application/json;charset=\"bad":  jsonText, // parameters do not change the kind
		"application/vnd.a2a+json":        jsonText,
		" text/html ":                     htmlText,
		"application/xhtml+xml":           htmlText,
		"text/plain; charset=utf-8":       plainText,
		"text/markdown":                   plainText,
		"application/xml":                 plainText,
		"image/svg+xml":                   plainText,
		"application/octet-stream":        notText,
		"":                                notText,
		"json":                            notText,
		"application/":                    notText,
		"/json":                           notText,
		"application/js on":               notText,
		"application/json/x":              notText,
		"text/plain\x00":                  notText,
	} {
		if got := kindOf(ct); got != want {
			t.Errorf("kindOf(%q) = %d, want %d", ct, got, want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { kindOf("application/json; charset=utf-8") }); n != 0 {
		t.Errorf("kindOf allocates %v times for a lower-case type", n)
	}
}
