package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// routes builds the handler: the API's routes (and the UI, when there is
// one) behind the safety checks, which run in this order: panic recovery
// and the access log around everything, then the Host check (DNS
// rebinding), CORS, the body limit, and the key.
func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.handleHealth)
	mux.HandleFunc("GET /v1/models", s.handleModels)
	mux.HandleFunc("GET /v1/models/{id...}", s.handleModel)
	mux.HandleFunc("POST /v1/chat/completions", s.handleChatCompletions)
	mux.HandleFunc("POST /v1/completions", s.handleCompletions)
	mux.HandleFunc("POST /v1/embeddings", s.handleEmbeddings)
	mux.HandleFunc("POST /v1/messages", s.handleMessages)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.handleCountTokens)
	mux.HandleFunc("POST /v1/responses", s.handleResponses)
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		if knownRoutes[r.URL.Path] != "" {
			w.Header().Set("Allow", knownRoutes[r.URL.Path])
			s.writeError(w, r, &apiError{Status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
				Message: fmt.Sprintf("%s takes %s, not %s", r.URL.Path, knownRoutes[r.URL.Path], r.Method)})
			return
		}
		s.writeError(w, r, notFound("no route %s %s: this server answers /v1/chat/completions, /v1/completions, /v1/responses, /v1/messages and /v1/models", r.Method, r.URL.Path))
	})
	if s.cfg.UI != nil {
		mux.Handle("/", s.cfg.UI)
	} else {
		mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			s.writeError(w, r, notFound("no route %s %s: this is Suzuran's API (/v1/…, /health)", r.Method, r.URL.Path))
		})
	}
	return s.logged(s.checkHost(s.cors(s.limitBody(s.authorize(mux)))))
}

// knownRoutes are the API's fixed paths with their method, to tell a wrong
// method (405) from an unknown route (404).
var knownRoutes = map[string]string{
	"/v1/models": "GET", "/v1/chat/completions": "POST", "/v1/completions": "POST", "/v1/embeddings": "POST",
	"/v1/messages": "POST", "/v1/messages/count_tokens": "POST", "/v1/responses": "POST",
}

// isAPIPath reports whether a path belongs to the API rather than the UI.
func isAPIPath(path string) bool {
	return path == "/health" || path == "/v1" || strings.HasPrefix(path, "/v1/")
}

// requestInfo collects what the access log reports about a request; the
// handlers fill it in through the request's context.
type requestInfo struct {
	promptTokens, cachedTokens, generatedTokens int
	finish                                      string
}

type requestInfoKey struct{}

func infoOf(ctx context.Context) *requestInfo {
	if info, ok := ctx.Value(requestInfoKey{}).(*requestInfo); ok {
		return info
	}
	return &requestInfo{}
}

// statusWriter records the status and size of a response and when its
// first byte went out. It passes Flush through for streaming (Unwrap gives
// http.ResponseController the underlying writer).
type statusWriter struct {
	http.ResponseWriter
	status    int
	bytes     int64
	start     time.Time
	firstByte time.Duration
}

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if w.firstByte == 0 {
		w.firstByte = time.Since(w.start)
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

var requestCounter atomic.Uint64

// logged writes one access-log line per request (method, path, status,
// tokens, durations; never bodies or keys) and turns a handler's panic into
// a 500, so that one bad request never stops the server.
func (s *Server) logged(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &requestInfo{}
		sw := &statusWriter{ResponseWriter: w, start: start}
		id := requestCounter.Add(1)
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error().Uint64("req", id).Str("path", r.URL.Path).Msgf("handler panic: %v", p)
				if sw.status == 0 {
					s.writeError(sw, r, fmt.Errorf("the handler failed: %v", p))
				}
			}
			ev := s.log.Info()
			if sw.status >= 500 {
				ev = s.log.Warn()
			}
			ev = ev.Uint64("req", id).Str("method", r.Method).Str("path", r.URL.Path).Int("status", sw.status).
				Int64("bytes", sw.bytes).Dur("duration", time.Since(start))
			if info.promptTokens > 0 || info.generatedTokens > 0 {
				ev = ev.Int("prompt_tokens", info.promptTokens).Int("cached_tokens", info.cachedTokens).
					Int("generated_tokens", info.generatedTokens).Str("finish", info.finish).Dur("first_byte", sw.firstByte)
			}
			ev.Msg("request")
		}()
		next.ServeHTTP(sw, r)
	})
}

// checkHost refuses requests whose Host header names something other than
// this machine: a web page on a hostile domain that rebinds its DNS name to
// 127.0.0.1 still sends its own name as Host, so it cannot reach the API.
// An exposed server (bound beyond loopback) accepts any Host: it requires
// the key instead.
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.exposed && !s.allowedHost(r.Host) {
			s.writeError(w, r, &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "host_not_allowed",
				Message: fmt.Sprintf("Host %q is not this server: use localhost or %s (requests through other host names are refused against DNS rebinding)", r.Host, s.Addr())})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// allowedHost reports whether a Host header names the loopback server.
func (s *Server) allowedHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// cors answers preflight requests and adds CORS headers for the configured
// origins, on the API's routes only. A browser request from any other
// origin (one that is not the server's own page) is refused, so that a web
// page cannot make the model work for it with a simple, unpreflighted
// request. The UI (its page, its calls and events) answers its own page
// only: the origins allowed for the API do not reach the user's
// conversations and settings.
func (s *Server) cors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		api := isAPIPath(r.URL.Path)
		allowed := api && s.originAllowed(origin)
		if !allowed && !sameOrigin(origin, r.Host) {
			msg := fmt.Sprintf("origin %s may not call this API: add it to the allowed origins (--cors)", origin)
			if !api {
				msg = fmt.Sprintf("origin %s may not use the chat UI: it answers only its own page (http://%s/); the allowed origins (--cors) may call the API under /v1", origin, r.Host)
			}
			s.writeError(w, r, &apiError{Status: http.StatusForbidden, Type: "invalid_request_error", Code: "origin_not_allowed", Message: msg})
			return
		}
		if allowed {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "Retry-After")
			if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
				h.Set("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
				h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key, Anthropic-Version, Anthropic-Beta, Anthropic-Dangerous-Direct-Browser-Access, OpenAI-Organization, OpenAI-Project, X-Stainless-Arch, X-Stainless-Lang, X-Stainless-Os, X-Stainless-Package-Version, X-Stainless-Retry-Count, X-Stainless-Runtime, X-Stainless-Runtime-Version, X-Stainless-Timeout, X-Stainless-Helper-Method")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) originAllowed(origin string) bool {
	return slices.Contains(s.cfg.CORSOrigins, "*") || slices.Contains(s.cfg.CORSOrigins, origin)
}

// sameOrigin reports whether origin is the server's own (its UI's page).
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// limitBody caps request bodies at Config.MaxBodyBytes; decoding past the
// cap fails with http.MaxBytesError, answered 413. A body must also arrive
// in time (Config.BodyGrace and MinBodyRate, see timedBody), and an API
// request's body counts against Config.RequestMemory until its handler
// returns (chargedBody).
func (s *Server) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > s.cfg.MaxBodyBytes {
			s.writeError(w, r, &http.MaxBytesError{Limit: s.cfg.MaxBodyBytes})
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			if isAPIPath(r.URL.Path) {
				// The UI's calls (uploads) are bounded by the app itself.
				charged := &chargedBody{ReadCloser: r.Body, budget: s.budget}
				defer charged.release()
				r.Body = charged
			}
			r.Body = &timedBody{ReadCloser: r.Body, rc: http.NewResponseController(w), start: time.Now(),
				grace: s.cfg.BodyGrace, rate: s.cfg.MinBodyRate}
		}
		r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// timedBody reads a request body under a deadline that grows with what
// has arrived: the body has its grace plus the time its bytes take at the
// minimum rate, so a body that comes fast is never cut and one that
// trickles (a byte every few seconds) is cut after about the grace. Once
// the body is read whole, net/http lifts the deadline as it starts its
// background read of the connection, so the answer (a stream may run for
// minutes) is not cut by it.
type timedBody struct {
	io.ReadCloser
	rc    *http.ResponseController
	start time.Time
	grace time.Duration
	rate  int64
	n     int64
	done  bool // the connection has no deadlines
}

func (b *timedBody) Read(p []byte) (int, error) {
	if !b.done {
		allowed := b.grace + time.Duration(float64(b.n)/float64(b.rate)*float64(time.Second))
		if err := b.rc.SetReadDeadline(b.start.Add(allowed)); err != nil {
			b.done = true // a writer without deadlines (a test recorder)
		}
	}
	n, err := b.ReadCloser.Read(p)
	b.n += int64(n)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return n, &apiError{Status: http.StatusRequestTimeout, Type: "invalid_request_error", Code: "request_timeout",
			Message: fmt.Sprintf("the request body came too slowly: %d bytes in %.0f s (a body gets %.0f s plus its size at %d KiB/s); send it whole without pausing",
				b.n, time.Since(b.start).Seconds(), b.grace.Seconds(), b.rate>>10)}
	}
	return n, err
}

// authorize requires the key, when one is set, on every route except
// /health and preflights: the API's, and the UI's page, calls and events,
// on loopback as beyond it (a browser asks for the key as the password of
// HTTP basic authentication when it opens the page, then sends it with
// every call). Keys are compared through their SHA-256 in constant time,
// so neither their content nor their length leaks through timing.
func (s *Server) authorize(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.cfg.APIKey))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		needed := s.cfg.APIKey != "" && r.Method != http.MethodOptions && r.URL.Path != "/health"
		if !needed {
			next.ServeHTTP(w, r)
			return
		}
		got := presentedKey(r)
		sum := sha256.Sum256([]byte(got))
		if got == "" || subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			msg := "invalid API key: send the server's key as \"Authorization: Bearer KEY\" or \"x-api-key: KEY\""
			if got == "" {
				msg = "this server requires an API key: send it as \"Authorization: Bearer KEY\" or \"x-api-key: KEY\""
			}
			if !isAPIPath(r.URL.Path) {
				msg = "this server's chat UI requires its API key: enter the key as the password when the browser asks (the user name is not checked)"
			}
			s.writeError(w, r, &apiError{Status: http.StatusUnauthorized, Type: "invalid_request_error", Code: "invalid_api_key", Message: msg})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// presentedKey is the key a request carries, in any of the accepted forms.
func presentedKey(r *http.Request) string {
	if auth := r.Header.Get("Authorization"); auth != "" {
		if key, ok := strings.CutPrefix(auth, "Bearer "); ok {
			return strings.TrimSpace(key)
		}
		if _, pass, ok := r.BasicAuth(); ok {
			return pass
		}
	}
	return r.Header.Get("X-Api-Key")
}
