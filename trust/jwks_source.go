package trust

// Where a caller's token keys come from: a JWK Set file, read again when it
// changes, or a JWK Set URL, fetched with a timeout, kept, fetched again
// every Refresh and, on a token naming a key id the set lacks, at most once
// per MinRefetch. Either keeps its last good set when a new one cannot be
// read or fetched, and says so in the log.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// KeySource gives the key set a caller's token is checked against.
type KeySource interface {
	// KeySet returns the current set. kid is the key id the token names
	// (""  when none): a source that can fetch again does so, within its
	// rate limit, when its set lacks that id.
	KeySet(ctx context.Context, kid string) (*KeySet, error)
}

// ErrKeysUnavailable is wrapped when a source has no key set at all (its
// URL never answered with one).
var ErrKeysUnavailable = errors.New("signing keys unavailable")

// JWKSFile is a key set read from a file and read again when the file's
// modification time or size changes (a Kubernetes Secret or ConfigMap
// update included: the mounted path then leads to a new file).
type JWKSFile struct {
	path string
	log  *slog.Logger
	set  atomic.Pointer[KeySet]
	seen atomic.Pointer[fileStamp] // the file as last read, good or not

	mu sync.Mutex // serialises reloads
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadJWKSFile reads and parses the key set at path; log (nil: none) is
// told when a later version of the file cannot be used.
func LoadJWKSFile(path string, log *slog.Logger) (*JWKSFile, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f := &JWKSFile{path: path, log: log}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJWKS, err)
	}
	if err := f.load(fi); err != nil {
		return nil, err
	}
	return f, nil
}

// KeySet returns the file's set, reading the file again first when it has
// changed since it was last read.
func (f *JWKSFile) KeySet(context.Context, string) (*KeySet, error) {
	if fi, err := os.Stat(f.path); err == nil {
		if st := f.seen.Load(); st == nil || !st.mod.Equal(fi.ModTime()) || st.size != fi.Size() {
			f.mu.Lock()
			if st := f.seen.Load(); st == nil || !st.mod.Equal(fi.ModTime()) || st.size != fi.Size() {
				if err := f.load(fi); err != nil {
					f.log.Warn("jwks: the changed key set file cannot be used; keeping the last good set",
						"file", f.path, "error", err.Error())
				}
			}
			f.mu.Unlock()
		}
	}
	return f.set.Load(), nil
}

// load reads the file whose stat is fi; on failure the set stays as it was
// and this version of the file is not read again.
func (f *JWKSFile) load(fi os.FileInfo) error {
	f.seen.Store(&fileStamp{mod: fi.ModTime(), size: fi.Size()})
	data, err := readCapped(f.path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrJWKS, err)
	}
	set, err := ParseJWKS(data)
	if err != nil {
		return err
	}
	f.set.Store(set)
	return nil
}

func readCapped(path string) ([]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	return io.ReadAll(io.LimitReader(fh, maxJWKSBytes+1))
}

// JWKSURLOptions configures a JWKSURL.
type JWKSURLOptions struct {
	URL string
	// Client fetches the set; nil: one of its own, bounded by Timeout.
	Client *http.Client
	// Timeout bounds one fetch (default 10s).
	Timeout time.Duration
	// Refresh is how often Run fetches the set again (default 5m).
	Refresh time.Duration
	// MinRefetch bounds how often a token naming an unknown key id makes
	// the set be fetched again (default 10s).
	MinRefetch time.Duration
	Log        *slog.Logger
}

// The defaults of a JWKSURL.
const (
	DefaultJWKSTimeout    = 10 * time.Second
	DefaultJWKSRefresh    = 5 * time.Minute
	DefaultJWKSMinRefetch = 10 * time.Second
)

// JWKSURL is a key set fetched from a URL.
type JWKSURL struct {
	o   JWKSURLOptions
	set atomic.Pointer[KeySet]

	mu      sync.Mutex // serialises fetches, guards the fields below
	lastTry time.Time
	lastErr error
}

// NewJWKSURL returns the source; nothing is fetched until Run or the first
// KeySet.
func NewJWKSURL(o JWKSURLOptions) *JWKSURL {
	if o.Timeout <= 0 {
		o.Timeout = DefaultJWKSTimeout
	}
	if o.Refresh <= 0 {
		o.Refresh = DefaultJWKSRefresh
	}
	if o.MinRefetch <= 0 {
		o.MinRefetch = DefaultJWKSMinRefetch
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &JWKSURL{o: o}
}

// Run fetches the set now and every Refresh until ctx ends.
func (u *JWKSURL) Run(ctx context.Context) {
	t := time.NewTicker(u.o.Refresh)
	defer t.Stop()
	for {
		u.mu.Lock()
		u.fetchLocked(ctx)
		u.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// KeySet returns the fetched set. When there is none yet, or kid is not
// in it, the set is fetched first, unless a fetch was tried within
// MinRefetch.
func (u *JWKSURL) KeySet(ctx context.Context, kid string) (*KeySet, error) {
	if s := u.set.Load(); s != nil && (kid == "" || s.HasKeyID(kid)) {
		return s, nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	// Another request may have fetched it while this one waited.
	if s := u.set.Load(); s != nil && (kid == "" || s.HasKeyID(kid)) {
		return s, nil
	}
	if time.Since(u.lastTry) >= u.o.MinRefetch {
		// The fetch serves every waiting request: the one that started it
		// going away does not cut it short.
		u.fetchLocked(context.WithoutCancel(ctx))
	}
	if s := u.set.Load(); s != nil {
		return s, nil
	}
	return nil, fmt.Errorf("%w: %s: %w", ErrKeysUnavailable, u.o.URL, u.lastErr)
}

// fetchLocked fetches the set, keeping the last good one on failure.
func (u *JWKSURL) fetchLocked(ctx context.Context) {
	u.lastTry = time.Now()
	set, err := u.fetch(ctx)
	if err != nil {
		u.lastErr = err
		u.o.Log.Warn("jwks: fetching the key set failed; keeping the last good set",
			"url", u.o.URL, "have_keys", u.set.Load() != nil, "error", err.Error())
		return
	}
	u.lastErr = nil
	u.set.Store(set)
}

func (u *JWKSURL) fetch(ctx context.Context) (*KeySet, error) {
	ctx, cancel := context.WithTimeout(ctx, u.o.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.o.URL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrJWKS, err)
	}
	req.Header.Set("Accept", "application/jwk-set+json, application/json")
	resp, err := u.o.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: fetching: %w", ErrJWKS, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
		return nil, fmt.Errorf("%w: fetching: status %d", ErrJWKS, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: reading: %w", ErrJWKS, err)
	}
	return ParseJWKS(data)
}
