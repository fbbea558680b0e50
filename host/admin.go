package host

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ListenAdmin opens the admin listener (so a caller can learn the port of
// ":0" before building the identity).
func ListenAdmin(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("host: admin listen %s: %w", addr, err)
	}
	return ln, nil
}

type adminServer struct {
	srv  *http.Server
	done chan struct{}
}

// adminMux is the one admin handler of a Host and a Multi: notReady
// returns why the process is not ready ("" = ready).
func adminMux(notReady func() string, g prometheus.Gatherer, status http.HandlerFunc) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if why := notReady(); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /status", status)
	return mux
}

// serveAdmin serves handler on ln until close.
func serveAdmin(ln net.Listener, handler http.Handler, log *slog.Logger) *adminServer {
	a := &adminServer{
		srv:  &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan struct{}),
	}
	log.Info("admin server listening", "addr", ln.Addr().String())
	go func() {
		defer close(a.done)
		if err := a.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("admin server failed", "err", err)
		}
	}()
	return a
}

func (a *adminServer) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = a.srv.Shutdown(ctx)
	<-a.done
}
