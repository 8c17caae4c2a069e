package edgehealth

import (
	"sort"
	"strconv"
	"time"
)

// ModelRow is one model's figures as text over a window: tokens per
// second, cost per hour, calls and the share of them that failed.
type ModelRow struct {
	Model
	Total                          float64 // tokens since the Baton started
	TokensPerSec, CostPerHour, Err string  // "-" when there is nothing to show
	Calls                          float64 // in the window
}

// ModelRows returns the figures of cur's models over the window since
// prev (since cur.Started when prev is nil), by API then model.
func ModelRows(prev, cur *Snapshot) []ModelRow {
	var window time.Duration
	switch {
	case prev != nil:
		window = cur.At.Sub(prev.At)
	case !cur.Started.IsZero():
		window = cur.At.Sub(cur.Started)
	}
	keys := make([]Model, 0, len(cur.Models))
	for k := range cur.Models {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].API != keys[j].API {
			return keys[i].API < keys[j].API
		}
		return keys[i].Name < keys[j].Name
	})
	rows := make([]ModelRow, 0, len(keys))
	for _, k := range keys {
		c := cur.Models[k]
		d := *c
		if prev != nil {
			if b := prev.Models[k]; b != nil && b.Calls <= c.Calls {
				d = ModelCounts{Calls: c.Calls - b.Calls, Failed: c.Failed - b.Failed, Tokens: c.Tokens - b.Tokens, CostUSD: c.CostUSD - b.CostUSD}
			}
		}
		r := ModelRow{Model: k, Total: c.Tokens, TokensPerSec: "-", CostPerHour: "-", Err: "-", Calls: d.Calls}
		if window > 0 {
			r.TokensPerSec = strconv.FormatFloat(d.Tokens/window.Seconds(), 'f', 1, 64)
			if c.CostUSD > 0 {
				r.CostPerHour = "$" + strconv.FormatFloat(d.CostUSD/window.Hours(), 'f', 4, 64)
			}
		}
		if d.Calls > 0 {
			r.Err = strconv.FormatFloat(100*d.Failed/d.Calls, 'f', 1, 64) + "%"
		}
		rows = append(rows, r)
	}
	return rows
}

// APIs returns what cur's model calls did over the window since prev
// (since the Baton started when prev is nil), summed per model API over
// its models: calls (failed ones among them), tokens and cost. A model
// whose counts went down (the Baton restarted) counts from zero.
func APIs(prev, cur *Snapshot) map[string]ModelCounts {
	out := make(map[string]ModelCounts, len(cur.Models))
	for k, c := range cur.Models {
		d := *c
		if prev != nil {
			if b := prev.Models[k]; b != nil && b.Calls <= c.Calls {
				d = ModelCounts{Calls: c.Calls - b.Calls, Failed: max(c.Failed-b.Failed, 0), Tokens: max(c.Tokens-b.Tokens, 0),
					CostUSD: max(c.CostUSD-b.CostUSD, 0)}
			}
		}
		s := out[k.API]
		s.Calls += d.Calls
		s.Failed += d.Failed
		s.Tokens += d.Tokens
		s.CostUSD += d.CostUSD
		out[k.API] = s
	}
	return out
}
