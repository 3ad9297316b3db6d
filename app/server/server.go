package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// DefaultAddr is where the API listens unless told otherwise. Port 11435 is
// none of the ports other local LLM servers take by default (Ollama 11434,
// LM Studio 1234, llama.cpp 8080, Jan 1337, vLLM 8000), so Suzuran can run
// beside any of them.
const DefaultAddr = "127.0.0.1:11435"

// Defaults for Config's zero values.
const (
	// DefaultMaxBodyBytes bounds a request body: a long conversation with
	// documents in it is a few megabytes of JSON; 32 MiB leaves room for a
	// prompt of the full 262,144-token context.
	DefaultMaxBodyBytes = 32 << 20
	// DefaultShutdownGrace is how long Shutdown lets running generations
	// finish before cancelling them: short enough that switching the API off
	// and on again is immediate, long enough for a reply that is nearly done.
	DefaultShutdownGrace = 500 * time.Millisecond
	// DefaultKeepAlive is how often a stream still waiting for its first
	// token (queued, or prefilling a long prompt) sends a keep-alive: well
	// under the idle timeouts of proxies and clients (30–60 s is common).
	DefaultKeepAlive = 10 * time.Second
	// DefaultBodyGrace and DefaultMinBodyRate bound how slowly a request
	// body may arrive: it has DefaultBodyGrace (as long as the headers
	// get) plus the time to arrive at DefaultMinBodyRate, so a 32 MiB body
	// has 8½ minutes, and a client that trickles bytes is cut after about
	// 10 s (408) instead of holding its connection and goroutine for as
	// long as it likes. 64 KiB/s is far below any link a client of this
	// server uses (loopback, a LAN).
	DefaultBodyGrace   = 10 * time.Second
	DefaultMinBodyRate = 64 << 10
	// retryAfterSeconds is what a 429 and a 503 ask the client to wait.
	retryAfterSeconds = 1
)

// Config configures a Server.
type Config struct {
	// Addr is host:port to listen on; "" means DefaultAddr. Port 0 picks a
	// free port (Addr reports which).
	Addr string
	// APIKey, when set, must come with every request but /health's, as
	// "Authorization: Bearer KEY" or "x-api-key: KEY" (the UI's browser
	// sends it as the basic authentication password). It is required when
	// Addr is not a loopback address.
	APIKey string
	// CORSOrigins are the browser origins ("https://app.example.com", or
	// "*" for any) that may call the API (/v1/…) from a web page. Others get
	// no CORS headers, and their cross-origin requests are refused. They do
	// not reach the UI, which answers its own page only.
	CORSOrigins []string
	// MaxBodyBytes bounds a request body (413 beyond); 0 means
	// DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// BodyGrace and MinBodyRate (bytes a second) bound how slowly a body
	// may arrive: it must be whole within BodyGrace plus its size at
	// MinBodyRate, else the request is cut with a 408. 0 means
	// DefaultBodyGrace and DefaultMinBodyRate.
	BodyGrace   time.Duration
	MinBodyRate int64
	// RequestMemory bounds the memory the API's requests hold together
	// while they are read, decoded and rendered, and while they wait in
	// the queue and run, reckoned from their bodies' size; a request that
	// would pass it gets a 429. 0 means DefaultRequestMemory.
	RequestMemory int64
	// Models hands out the engine. Required.
	Models Models
	// Logger receives the access log and the server's events.
	Logger zerolog.Logger
	// LogRequests logs each request's decoded parameters (never bodies'
	// text or keys) and each generation's timings at debug level.
	LogRequests bool
	// ThinkingDefault is whether a request that does not say turns thinking
	// on; nil leaves the chat template's default (on for Qwen3.6).
	ThinkingDefault *bool
	// ShutdownGrace is how long Shutdown waits for running generations
	// before cancelling them; 0 means DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// DefaultMaxTokens bounds the answer of an API request that gives no
	// max_tokens, so that one client cannot hold a batch slot for a whole
	// context; 0 leaves such requests bounded by the context only.
	DefaultMaxTokens int
	// UI, when set, serves every path outside the API (/v1/…, /health):
	// the chat UI in a browser, behind the same Host and key checks, for
	// its own page's origin only.
	UI http.Handler
}

// Server is the HTTP API. It can be started and shut down any number of
// times; the engine belongs to Config.Models and survives both.
type Server struct {
	cfg     Config
	handler http.Handler
	log     zerolog.Logger
	// exposed is true when the address is not loopback: the key is then
	// required, and any Host is accepted (the key, not the Host header, is
	// what protects an exposed server).
	exposed bool

	mu      sync.Mutex
	http    *http.Server
	ln      net.Listener
	cancel  context.CancelFunc // cancels every request of the running server
	serving chan struct{}      // closed when Serve returns

	// budget counts what the API's requests in flight hold
	// (Config.RequestMemory).
	budget *memoryBudget

	// running counts the generations submitted and not yet finished (tests
	// and the soak read it).
	running atomic.Int64
	// keepAliveInterval is how often a stream that has no token yet sends
	// a keep-alive (DefaultKeepAlive; tests shorten it).
	keepAliveInterval time.Duration
	// tokenWritten, when set (benchmarks), is called after each streamed
	// token's bytes were flushed, with the time since the engine's event.
	tokenWritten func(time.Duration)
}

// New checks cfg and returns a server that is not yet listening.
func New(cfg Config) (*Server, error) {
	if cfg.Models == nil {
		return nil, errors.New("server: Config.Models is required")
	}
	if cfg.Addr == "" {
		cfg.Addr = DefaultAddr
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.BodyGrace <= 0 {
		cfg.BodyGrace = DefaultBodyGrace
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.RequestMemory <= 0 {
		cfg.RequestMemory = DefaultRequestMemory
	}
	exposed, err := CheckAddr(cfg.Addr, cfg.APIKey)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger, exposed: exposed, keepAliveInterval: DefaultKeepAlive,
		budget: &memoryBudget{limit: cfg.RequestMemory}}
	s.handler = s.routes()
	return s, nil
}

// CheckAddr checks a listen address and the key it needs, as New does,
// before anything is opened: exposed is true when addr reaches beyond this
// machine, which requires a key.
func CheckAddr(addr, apiKey string) (exposed bool, err error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("address %q: %v; use host:port such as %s", addr, err, DefaultAddr)
	}
	exposed = !isLoopbackHost(host)
	if exposed && apiKey == "" {
		return true, fmt.Errorf("address %s is reachable from other machines, so it needs an API key: set one (--api-key), or bind 127.0.0.1", addr)
	}
	return exposed, nil
}

// isLoopbackHost reports whether host (a name or an IP, without port) only
// reaches this machine.
func isLoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Handler returns the server's handler, for tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// Start binds the address and serves in the background; it returns once
// the port is bound (or why it could not be).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.http != nil {
		return fmt.Errorf("the API server is already listening on %s", s.ln.Addr())
	}
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("API server: listening on %s: %w (is another program using the port? choose another with --addr)", s.cfg.Addr, err)
	}
	base, cancel := context.WithCancel(context.Background())
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		// Streams may run for minutes, so there is no write timeout; an idle
		// kept-alive connection is closed after a while.
		IdleTimeout: 2 * time.Minute,
		BaseContext: func(net.Listener) context.Context { return base },
	}
	serving := make(chan struct{})
	s.http, s.ln, s.cancel, s.serving = srv, ln, cancel, serving
	go func() {
		defer close(serving)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error().Err(err).Msg("API server stopped")
		}
	}()
	s.log.Info().Str("addr", ln.Addr().String()).Bool("api_key", s.cfg.APIKey != "").Msg("API server listening")
	return nil
}

// Addr is the bound address while the server runs ("host:port"), else the
// configured one.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return s.ln.Addr().String()
	}
	return s.cfg.Addr
}

// Shutdown stops listening at once (the port is free when it returns), lets
// running requests finish for the grace period (Config.ShutdownGrace, or
// less if ctx ends sooner), then cancels them: a generation ends within one
// token, a stream ends after its last event. Shutting down a server that is
// not running does nothing.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	srv, cancel, serving := s.http, s.cancel, s.serving
	s.http, s.ln, s.cancel, s.serving = nil, nil, nil, nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	grace, stop := context.WithTimeout(ctx, s.cfg.ShutdownGrace)
	defer stop()
	err := srv.Shutdown(grace) // closes the listener first, then waits
	if err != nil {
		// Requests outlived the grace: cancel them, then wait for their
		// handlers, which return within a token.
		cancel()
		drain, stopDrain := context.WithTimeout(context.Background(), time.Second)
		defer stopDrain()
		if err = srv.Shutdown(drain); err != nil {
			err = errors.Join(fmt.Errorf("API server: requests still running after cancelling them: %w", err), srv.Close())
		}
	}
	cancel()
	<-serving
	s.log.Info().Msg("API server stopped")
	return err
}
