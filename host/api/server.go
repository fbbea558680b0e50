package api

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/wasmsched/wasmsched/client"
	"github.com/wasmsched/wasmsched/host"
	"github.com/wasmsched/wasmsched/internal/limits"
	"github.com/wasmsched/wasmsched/policies"
	"github.com/wasmsched/wasmsched/storage"
)

//go:embed openapi.json
var openapiJSON []byte

//go:embed ui
var uiFS embed.FS

// Server timeouts and bounds.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = 30 * time.Second // not for the event streams
	idleTimeout       = 2 * time.Minute
	maxHeaderBytes    = 64 << 10
	// maxConcurrentDecisions bounds the dry-runs and explanations in flight
	// (each runs a policy in the API's own sandbox).
	maxConcurrentDecisions = 2
	// maxEventStreams bounds the open /events streams.
	maxEventStreams = 1000
)

// Config configures New. Store is required; the zero value of the rest
// means: the store's namespace only, no tokens (open), the default
// sandbox.
type Config struct {
	// Store is one served namespace's store; the others (Namespaces) are
	// opened on its connection.
	Store *storage.Store
	// Namespaces the API serves besides Store's (a multi-namespace host's).
	// Namespaces registered in Redis (storage.ListNamespaces) are listed
	// and served too.
	Namespaces []string
	// Tokens (nil = open).
	Tokens *Tokens
	// Sandbox configures the runtime that runs dry-runs and explanations.
	// Zero = policies' defaults (the compilation cache in the user's cache
	// directory, as for hosts and the CLI), pool size 1. The modules it
	// decided with stay loaded (host.Inspector), so a request after the
	// first pays no compilation or instantiation.
	Sandbox policies.Config
	Logger  *slog.Logger
}

// Validate checks the config.
func (c Config) Validate() error {
	if c.Store == nil {
		return errors.New("api: Config.Store is required")
	}
	for _, ns := range c.Namespaces {
		if err := limits.ValidateName("namespace", ns); err != nil {
			return fmt.Errorf("api: Config.Namespaces: %w", err)
		}
	}
	return nil
}

// Server is the API and UI handler.
type Server struct {
	cfg     Config
	log     *slog.Logger
	rt      *policies.Runtime
	in      *host.Inspector // keeps the policies it decided with loaded
	decide  chan struct{}   // semaphore: maxConcurrentDecisions
	hubs    *hubs
	remotes *remoteWorkers // the workers registered over HTTP
	mux     *http.ServeMux
}

// New builds the server (its policy runtime too: Close it).
func New(ctx context.Context, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	sb := cfg.Sandbox
	if sb.PoolSize == 0 {
		sb.PoolSize = 1
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if sb.Logger == nil {
		sb.Logger = log
	}
	rt, err := policies.NewRuntime(ctx, sb)
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s := &Server{cfg: cfg, log: log, rt: rt, in: host.NewInspector(rt), decide: make(chan struct{}, maxConcurrentDecisions)}
	s.hubs = newHubs(s)
	s.remotes = newRemoteWorkers()
	s.routes()
	return s, nil
}

// Close ends the event streams, stops the workers registered over HTTP
// (their runs in flight are interrupted) and closes the runtime.
func (s *Server) Close(ctx context.Context) error {
	s.hubs.close()
	s.remotes.close()
	return errors.Join(s.in.Close(ctx), s.rt.Close(ctx))
}

// Handler is the API (/api/v1/...) and the UI (/ui/).
func (s *Server) Handler() http.Handler { return s.mux }

// Serve serves on ln until ctx ends, with the server timeouts.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout,
		WriteTimeout: writeTimeout, IdleTimeout: idleTimeout, MaxHeaderBytes: maxHeaderBytes,
		BaseContext: func(net.Listener) context.Context { return ctx }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		<-ctx.Done()
		s.hubs.close()    // event streams end, so Shutdown does not wait for them
		s.remotes.close() // and the workers registered over HTTP stop: their streams end
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	err := srv.Serve(ln)
	<-done
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// IsLoopback reports whether addr (host:port) listens on loopback only.
func IsLoopback(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if h == "localhost" {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// handler is an API handler: it returns a status and a JSON body, or an error.
type handler func(w http.ResponseWriter, r *http.Request, c *call) (int, any, error)

// call is one request's context: who, and the namespace's client.
type call struct {
	who principal
	c   *client.Client
	st  *storage.Store
}

// api registers pattern (a Go 1.22 mux pattern under /api/v1) with auth
// and, for {ns} routes, the namespace.
func (s *Server) api(pattern string, h handler) {
	s.mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		p, err := s.authorize(r, strings.Contains(pattern, "/workers"))
		if err != nil {
			writeError(w, err)
			return
		}
		cl := &call{who: p}
		if ns := r.PathValue("ns"); ns != "" || strings.Contains(pattern, "{ns}") {
			st, err := s.namespace(r.Context(), ns)
			if err != nil {
				writeError(w, err)
				return
			}
			if cl.c, err = client.NewFromRedis(st.Redis(), st.Namespace()); err != nil {
				writeError(w, err)
				return
			}
			cl.st = st
		}
		status, v, err := h(w, r, cl)
		if err != nil {
			writeError(w, err)
			return
		}
		if status == 0 {
			return // streamed
		}
		writeJSON(w, status, v)
	})
}

// namespaces lists the served namespaces, sorted.
func (s *Server) namespaces(ctx context.Context) ([]string, error) {
	out := append([]string{s.cfg.Store.Namespace()}, s.cfg.Namespaces...)
	reg, err := s.cfg.Store.Namespaces(ctx)
	if err != nil {
		return nil, err
	}
	out = append(out, reg...)
	slices.Sort(out)
	return slices.Compact(out), nil
}

// namespace opens a served namespace (404 for any other).
func (s *Server) namespace(ctx context.Context, ns string) (*storage.Store, error) {
	if err := limits.ValidateName("namespace", ns); err != nil {
		return nil, err
	}
	if ns == s.cfg.Store.Namespace() {
		return s.cfg.Store, nil
	}
	all, err := s.namespaces(ctx)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(all, ns) {
		return nil, errorf(http.StatusNotFound, "not_found", "namespace %s is not served here (served: %s)", ns, strings.Join(all, ", "))
	}
	return s.cfg.Store.Sibling(ns)
}

// routeTable is every API route: method and path (the OpenAPI form,
// also the Go mux pattern).
func (s *Server) routeTable() []struct {
	pattern string
	h       handler
} {
	const p = "/api/v1/namespaces/{ns}"
	return []struct {
		pattern string
		h       handler
	}{
		{"GET /api/v1/namespaces", s.listNamespaces},
		{"GET /api/v1/whoami", s.whoami},
		{"GET " + p + "/overview", s.overview},
		{"GET " + p + "/groups", s.listGroups},
		{"GET " + p + "/groups/{g}", s.getGroup},
		{"PUT " + p + "/groups/{g}", s.putGroup},
		{"POST " + p + "/groups/{g}/runs", s.submit},
		{"POST " + p + "/groups/{g}/dry-run", s.dryRun},
		{"POST " + p + "/groups/{g}/pause", s.groupAction("pause")},
		{"POST " + p + "/groups/{g}/resume", s.groupAction("resume")},
		{"POST " + p + "/groups/{g}/discard", s.groupAction("discard")},
		{"POST " + p + "/groups/{g}/stop", s.groupAction("stop")},
		{"GET " + p + "/runs", s.listRuns},
		{"GET " + p + "/runs/{id}", s.getRun},
		{"GET " + p + "/runs/{id}/explain", s.explain},
		{"POST " + p + "/runs/{id}/stop", s.stop},
		{"POST " + p + "/runs/{id}/retry", s.retry},
		{"POST " + p + "/groups/{g}/retry", s.retryGroup},
		{"GET " + p + "/slots", s.slots},
		{"GET " + p + "/lost", s.lost},
		{"GET " + p + "/allocation", s.getAllocation},
		{"PUT " + p + "/allocation", s.putAllocation},
		{"GET " + p + "/series", s.series},
		{"GET " + p + "/leader", s.leader},
		{"GET " + p + "/policies", s.listPolicies},
		{"POST " + p + "/policies/{name}/activate", s.activate},
		{"POST " + p + "/policies/{name}/rollback", s.rollback},
		{"GET " + p + "/events", s.events},
		{"GET " + p + "/schedules", s.listSchedules},
		{"GET " + p + "/schedules/{name}", s.getSchedule},
		{"PUT " + p + "/schedules/{name}", s.putSchedule},
		{"DELETE " + p + "/schedules/{name}", s.scheduleAction("delete")},
		{"POST " + p + "/workers", s.registerWorker},
		{"POST " + p + "/workers/{w}/heartbeat", s.heartbeat},
		{"GET " + p + "/workers/{w}/assignments", s.assignments},
		{"POST " + p + "/workers/{w}/runs/{id}/report", s.report},
		{"POST " + p + "/workers/{w}/reports", s.reports},
		{"POST " + p + "/workers/{w}/runs/{id}/progress", s.progress},
		{"DELETE " + p + "/workers/{w}", s.drainWorker},
		{"POST " + p + "/schedules/{name}/pause", s.scheduleAction("pause")},
		{"POST " + p + "/schedules/{name}/resume", s.scheduleAction("resume")},
	}
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	allow := map[string][]string{} // path -> the methods it is routed for
	for _, r := range s.routeTable() {
		s.api(r.pattern, r.h)
		method, path, _ := strings.Cut(r.pattern, " ")
		allow[path] = append(allow[path], method)
	}
	// A routed path asked with another method is 405 with an Allow header
	// (the catch-all below would otherwise answer 404): a method-less
	// pattern matches only what the method-specific ones do not.
	for path, methods := range allow {
		methods := strings.Join(methods, ", ")
		s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", methods)
			writeError(w, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "%s %s: this route takes %s", r.Method, r.URL.Path, methods))
		})
	}
	s.mux.HandleFunc("GET /api/v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(openapiJSON)
	})
	s.mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errorf(http.StatusNotFound, "not_found", "no route %s %s (see /api/v1/openapi.json)", r.Method, r.URL.Path))
	})
	sub, _ := fs.Sub(uiFS, "ui")
	files := http.StripPrefix("/ui/", http.FileServerFS(sub))
	s.mux.Handle("GET /ui/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		files.ServeHTTP(w, r)
	}))
	s.mux.HandleFunc("POST /ui/login", s.login)
	s.mux.HandleFunc("POST /ui/logout", s.logout)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
}
