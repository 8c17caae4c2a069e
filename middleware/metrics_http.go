package middleware

// The HTTP semantic-convention series: http.server.request.duration per
// listener side and http.client.request.duration per destination, each by
// method and status code.

import (
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// HTTPSeries is an HTTP duration instrument's labels for one server (a
// listener side) or one client destination: method and status code on top,
// each combination built on first use.
type HTTPSeries struct {
	h      *histogram
	client bool
	base   []attribute.KeyValue
	rows   [len(httpMethods) + 1]atomic.Pointer[statusRow]
}

// statusRow holds the series of one method by status: index 0 is no
// status (a transport error), 1 to 500 are 100 to 599.
type statusRow [501]atomic.Pointer[series]

// httpMethods are the methods labelled by name; any other is "_OTHER", as
// the HTTP semantic conventions say.
var httpMethods = [...]string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
	http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace}

func methodIndex(m string) int {
	for i, v := range httpMethods {
		if v == m {
			return i
		}
	}
	return len(httpMethods)
}

// Client returns the series of HTTP client requests to server, which must
// be bounded (a peer's name, the local agent's host); "" leaves
// server.address out.
func (m *Metrics) Client(server string) *HTTPSeries {
	if m == nil {
		return nil
	}
	s := &HTTPSeries{h: m.clientTime, client: true}
	if server != "" {
		s.base = []attribute.KeyValue{keyServer.String(server)}
	}
	return s
}

// Record records one client request that took d; status 0 means it failed
// without a response.
func (s *HTTPSeries) Record(method string, status int, d time.Duration) {
	if s == nil {
		return
	}
	s.point(method, status).record(d.Seconds())
}

// point returns the series of method and status.
func (s *HTTPSeries) point(method string, status int) *series {
	mi, si := methodIndex(method), 0
	if status >= 100 && status <= 599 {
		si = status - 99
	}
	row := s.rows[mi].Load()
	if row == nil {
		s.rows[mi].CompareAndSwap(nil, new(statusRow))
		row = s.rows[mi].Load()
	}
	if p := row[si].Load(); p != nil {
		return p
	}
	return s.build(row, mi, si)
}

func (s *HTTPSeries) build(row *statusRow, mi, si int) *series {
	kvs := append(make([]attribute.KeyValue, 0, len(s.base)+3), s.base...)
	method := "_OTHER"
	if mi < len(httpMethods) {
		method = httpMethods[mi]
	}
	kvs = append(kvs, keyMethod.String(method))
	switch status := si + 99; {
	case si == 0:
		kvs = append(kvs, keyErrorType.String("_OTHER"))
	case status >= 500 || (s.client && status >= 400):
		kvs = append(kvs, keyStatus.Int(status), keyErrorType.String(strconv.Itoa(status)))
	default:
		kvs = append(kvs, keyStatus.Int(status))
	}
	set := attribute.NewSet(kvs...)
	p := s.h.series(set, []metric.RecordOption{metric.WithAttributeSet(set)})
	if !row[si].CompareAndSwap(nil, p) {
		return row[si].Load()
	}
	return p
}
