package inject

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// CertReloader serves the key pair in two files and loads it again when
// either file changes: a Secret volume update, a cert-manager renewal. It
// checks the files on each TLS handshake (a stat of each: the API server
// keeps its connections open, so handshakes are rare), and keeps serving
// the pair it has while a new one does not load (say, the certificate was
// written and the key not yet).
type CertReloader struct {
	certFile, keyFile string
	log               *slog.Logger

	mu    sync.Mutex
	cert  *tls.Certificate
	certs os.FileInfo
	keys  os.FileInfo
}

// NewCertReloader loads the pair once; an error means there is nothing to
// serve.
func NewCertReloader(certFile, keyFile string, log *slog.Logger) (*CertReloader, error) {
	c := &CertReloader{certFile: certFile, keyFile: keyFile, log: log}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *CertReloader) reload() error {
	cs, err := os.Stat(c.certFile)
	if err != nil {
		return fmt.Errorf("inject: tls certificate: %w", err)
	}
	ks, err := os.Stat(c.keyFile)
	if err != nil {
		return fmt.Errorf("inject: tls key: %w", err)
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("inject: tls key pair: %w", err)
	}
	c.cert, c.certs, c.keys = &pair, cs, ks
	return nil
}

// changed reports whether a file differs from what was loaded: another
// inode (a Secret volume swaps a symlink), modification time or size.
func changed(path string, was os.FileInfo) bool {
	now, err := os.Stat(path)
	if err != nil {
		return false // mid-swap: keep what works
	}
	return !os.SameFile(was, now) || !now.ModTime().Equal(was.ModTime()) || now.Size() != was.Size()
}

// GetCertificate is for tls.Config.
func (c *CertReloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if changed(c.certFile, c.certs) || changed(c.keyFile, c.keys) {
		if err := c.reload(); err != nil {
			c.log.Warn("keeping the current serving certificate", "error", err.Error())
		} else {
			c.log.Info("serving certificate reloaded", "not_after", c.cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	return c.cert, nil
}

// Ready reports an error when the serving certificate has expired.
func (c *CertReloader) Ready() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if leaf := c.cert.Leaf; leaf != nil && time.Now().After(leaf.NotAfter) {
		return fmt.Errorf("the serving certificate expired at %s", leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	return nil
}

// Serve serves h over HTTPS on ln with the certificates of certs until ctx
// ends, then lets requests in flight finish for up to grace.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, certs *CertReloader, grace time.Duration) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		TLSConfig: &tls.Config{
			MinVersion:     tls.VersionTLS12,
			GetCertificate: certs.GetCertificate,
		},
		ErrorLog: slog.NewLogLogger(certs.log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("inject: serving: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
