package approval

import "github.com/batonproxy/baton/trust/taint"

// injected reports whether an untrusted span of the handoff scores at or
// above the injection threshold (taint.Detect, as the receiving Baton
// scans it): every string under each labelled pointer of a JSON body, or
// the whole of another body labelled as a whole. It scans once per
// handoff, and only when a rule asks.
func (d *gateDoc) injected() bool {
	if d.injRead {
		return d.inj
	}
	d.injRead = true
	in := d.in
	if in.Labels == nil || !in.Buffered {
		return false
	}
	body := d.jsonBody()
	for _, l := range in.Labels.Spans {
		if body == nil {
			if l.Pointer == "" && taint.Detect(in.Body).Score >= d.score {
				d.inj = true
			}
			continue
		}
		v, ok := lookupPointer(body, l.Pointer)
		if ok && anyString(v, func(s string) bool { return taint.Detect([]byte(s)).Score >= d.score }) {
			d.inj = true
		}
		if d.inj {
			break
		}
	}
	return d.inj
}

// anyString reports whether fn holds for a string in v, a decoded JSON
// value, looking no further than the first.
func anyString(v any, fn func(string) bool) bool {
	switch v := v.(type) {
	case string:
		return fn(v)
	case map[string]any:
		for _, e := range v {
			if anyString(e, fn) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if anyString(e, fn) {
				return true
			}
		}
	}
	return false
}
