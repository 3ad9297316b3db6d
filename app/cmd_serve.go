package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/frontend"
)

// serveOptions are the flags of `suzuran serve`.
type serveOptions struct {
	model, addr, backend, apiKey string
	precision                    string
	cors                         []string
	contextTokens, threads       int
	queue, parallel, maxTokens   int
	logRequests                  bool
	// The chat UI at /: its database and settings file ("" for the app's),
	// a pause after each token, or no UI at all.
	database, settings string
	pace               time.Duration
	noUI               bool
}

// savedAPI takes the API settings saved in the chat UI's Settings (its
// port, network access with its key, allowed origins, default answer
// bound) for each flag the command line did not give (changed says which
// it gave), so that what was saved under serve applies when serve starts
// again. A key from $SUZURAN_API_KEY counts as given.
func (o *serveOptions) savedAPI(changed func(flag string) bool, s service.Settings) {
	if !changed("addr") && s.APIPort > 0 {
		host := "127.0.0.1"
		if s.APILAN {
			host = "0.0.0.0"
		}
		o.addr = net.JoinHostPort(host, strconv.Itoa(s.APIPort))
	}
	if o.apiKey == "" && s.APILAN {
		o.apiKey = s.APIKey
	}
	if !changed("cors") && len(s.APICORSOrigins) > 0 {
		o.cors = slices.Clone(s.APICORSOrigins)
	}
	if !changed("max-tokens") && s.APIMaxTokens > 0 {
		o.maxTokens = s.APIMaxTokens
	}
}

// apiKeyEnv holds the key when it should not show in the process list.
const apiKeyEnv = "SUZURAN_API_KEY"

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--model DIR] [--addr 127.0.0.1:PORT] [--backend cpu|emu|metal] [--api-key KEY] [--cors ORIGIN,…] [--ctx N] [--no-ui]",
		Short: "Serve the model over an OpenAI- and Anthropic-compatible HTTP API, and the chat UI to a browser",
		Long: `serve runs the local API without the app: OpenAI's /v1/chat/completions,
/v1/completions, /v1/responses and /v1/models, Anthropic's /v1/messages, and
/health, on ` + server.DefaultAddr + ` unless --addr says otherwise (port 11435: none
of Ollama's 11434, LM Studio's 1234, llama.cpp's 8080, Jan's 1337 or vLLM's 8000).

At / it serves the app's chat window to a browser, on the same engine as the
API, with the app's conversations and settings (--db and --settings choose
other files). --no-ui serves the API alone, and then opens no database.

It binds 127.0.0.1 by default. Binding any other address needs an API key
(--api-key, or the ` + apiKeyEnv + ` environment variable, which keeps it out of
the process list). With a key, every route but /health needs it: clients
send it as "Authorization: Bearer KEY" or "x-api-key: KEY"; a browser
opening the chat UI asks for it as a password. Browser pages may call the
API (/v1) only from the origins given with --cors; the chat UI's own calls
answer only the page this server serves.

Ctrl-C (SIGINT) or SIGTERM stops it: the port is freed at once and running
answers end within a second.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.apiKey == "" {
				o.apiKey = os.Getenv(apiKeyEnv)
			}
			return runServe(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", "model folder (default: the configured model, else the demo model)")
	f.StringVar(&o.addr, "addr", server.DefaultAddr, "address to listen on, host:port")
	f.StringVar(&o.backend, "backend", defaultBackend(), "backend to run on: "+strings.Join(engine.Backends(), ", "))
	f.StringVar(&o.apiKey, "api-key", "", "key every request must carry (required beyond 127.0.0.1; default $"+apiKeyEnv+")")
	f.StringSliceVar(&o.cors, "cors", nil, "browser origins allowed to call the API, comma-separated (* for any)")
	f.IntVar(&o.contextTokens, "ctx", 0, "context length in tokens, prompt and answer (0: min(the model's, 32768))")
	f.IntVar(&o.threads, "threads", 0, "CPU threads (0: all cores)")
	addPrecisionFlag(cmd, &o.precision)
	f.IntVar(&o.queue, "queue", 0, "requests that may wait behind the running ones before the API answers 429 (0: 8)")
	f.IntVar(&o.parallel, "parallel", 0, "requests decoded together in one batched step (0: 4 on a GPU, 2 on cpu)")
	f.IntVar(&o.maxTokens, "max-tokens", 0, "answer bound of a request that gives no max_tokens (0: the context's room)")
	f.BoolVar(&o.logRequests, "log-requests", false, "log each request's parameters and timings (never its text or the key) at debug level")
	f.StringVar(&o.database, "db", "", "the chat UI's conversation database (default: the app's)")
	f.StringVar(&o.settings, "settings", "", "the chat UI's settings file (default: the app's settings.json)")
	f.DurationVar(&o.pace, "pace", 0, "pause after each token, to stream a small model at the full model's speed (10ms is about 100 tokens/s)")
	f.BoolVar(&o.noUI, "no-ui", false, "serve the API only: no chat UI at /, no conversation database")
	return cmd
}

func runServe(cmd *cobra.Command, o serveOptions) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	// The model: --model, else the configured one, else the demo. With
	// --settings the service reads "model" from that file itself.
	var dir string
	if o.model != "" || o.settings == "" {
		var err error
		if dir, err = commandModel(cmd, o.model); err != nil {
			return err
		}
	}
	logger := log.Logger
	if o.logRequests && logger.GetLevel() > zerolog.DebugLevel {
		logger = logger.Level(zerolog.DebugLevel)
	}
	opts := engine.LoadOptions{Backend: o.backend, Threads: o.threads, ContextTokens: o.contextTokens, QueueSize: o.queue,
		Parallel: o.parallel, Precision: o.precision}
	cfg := server.Config{
		Addr: o.addr, APIKey: o.apiKey, CORSOrigins: o.cors,
		Logger: logger, LogRequests: o.logRequests, DefaultMaxTokens: o.maxTokens,
	}
	// Check the address and key before opening anything.
	if _, err := server.CheckAddr(o.addr, o.apiKey); err != nil {
		return err
	}

	var h *serveHost
	if o.noUI {
		h = o.openAPIOnly(&cfg, opts, dir, logger)
	} else {
		var err error
		if h, err = o.openService(cmd, &cfg, dir, logger); err != nil {
			return err
		}
		if dir == "" {
			dir = h.svc.ModelState().Dir
		}
	}
	wait, closeAll, svc := h.wait, h.closeAll, h.svc
	srv, err := server.New(cfg)
	if err != nil {
		closeAll()
		return err
	}
	// Listen before loading ends, so that a taken port fails at once and
	// clients see 503 "loading" rather than a refused connection.
	if err := srv.Start(); err != nil {
		closeAll()
		return err
	}
	logger.Info().Str("model", modelhost.Name(dir)).Str("dir", dir).Str("backend", o.backend).Msg("loading the model")
	fmt.Fprintf(cmd.ErrOrStderr(), "serving %s on http://%s/v1\n", dir, srv.Addr())
	if svc != nil {
		// The UI's settings view shows the API as this server, not its switch.
		exposed, _ := server.CheckAddr(o.addr, o.apiKey)
		svc.SetServedAPI("http://"+reachableAddr(srv.Addr()), exposed)
		fmt.Fprintf(cmd.ErrOrStderr(), "chat UI at http://%s/\n", srv.Addr())
	}
	start := time.Now()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := wait(ctx); err != nil && !errors.Is(err, context.Canceled) {
		srv.Shutdown(context.Background())
		closeAll()
		return fmt.Errorf("loading %s: %w", dir, err)
	}
	if ctx.Err() == nil {
		logger.Info().Dur("took", time.Since(start)).Msg("model ready")
		if f := cfg.Models.Status().Fallback; f != "" {
			logger.Warn().Msg(f)
			fmt.Fprintln(cmd.ErrOrStderr(), f)
		}
	}
	<-ctx.Done()
	stop()
	logger.Info().Msg("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	return errors.Join(err, closeAll())
}

// serveHost is what serves the model behind the API: with the chat UI, the
// service (svc); with --no-ui, a model host of its own.
type serveHost struct {
	wait     func(context.Context) error // until the model is loaded
	closeAll func() error
	svc      *service.Service // nil with --no-ui
}

// check refuses flags out of range, or that do not go together.
func (o serveOptions) check(cmd *cobra.Command) error {
	if err := checkBackend(o.backend); err != nil {
		return err
	}
	if err := checkPrecision(cmd, o.backend, o.precision); err != nil {
		return err
	}
	if o.contextTokens < 0 {
		return fmt.Errorf("--ctx %d: must be positive (or 0 for the default)", o.contextTokens)
	}
	if o.parallel < 0 || o.maxTokens < 0 {
		return fmt.Errorf("--parallel %d, --max-tokens %d: must be positive (or 0 for the default)", o.parallel, o.maxTokens)
	}
	if o.threads < 0 {
		return fmt.Errorf("--threads %d: use 0 (all cores) or more", o.threads)
	}
	if o.pace < 0 || o.pace > time.Second {
		return fmt.Errorf("--pace %v: use 0 to 1s", o.pace)
	}
	if o.noUI && (o.database != "" || o.settings != "" || o.pace != 0) {
		return errors.New("--db, --settings and --pace are the chat UI's: drop them, or --no-ui")
	}
	return nil
}

// openAPIOnly starts loading the model for --no-ui: a model host and the
// prefix store, and no conversation database.
func (o serveOptions) openAPIOnly(cfg *server.Config, opts engine.LoadOptions, dir string, logger zerolog.Logger) *serveHost {
	h := &serveHost{}
	prefix := openPrefixStore(func(msg string) { logger.Warn().Msg(msg) })
	opts.Store = prefix
	host := modelhost.New(modelhost.Options{Load: opts, GPU: gpuCheckOptions(o.backend, logger)})
	cfg.Models = host
	host.Load(dir)
	h.wait = func(ctx context.Context) error { _, err := host.Wait(ctx); return err }
	h.closeAll = func() error {
		err := host.Close()
		if prefix != nil {
			prefix.Close()
		}
		return err
	}
	return h
}

// openService opens the chat UI's service, which loads the model, and
// takes the API settings saved in its Settings where the command line
// gives none.
func (o *serveOptions) openService(cmd *cobra.Command, cfg *server.Config, dir string, logger zerolog.Logger) (*serveHost, error) {
	svc, err := service.Open(service.Options{
		DatabasePath:  o.database,
		SettingsPath:  o.settings,
		Model:         dir,
		Backend:       o.backend,
		Threads:       o.threads,
		Precision:     o.precision,
		ContextTokens: o.contextTokens,
		QueueSize:     o.queue,
		Parallel:      o.parallel,
		Pace:          o.pace,
		Version:       version,
		Log:           logger.With().Str("part", "service").Logger(),
		Report:        doctorJSON,
	})
	if err != nil {
		return nil, err
	}
	// The API settings saved in the UI's Settings stand where the
	// command line gives none.
	o.savedAPI(cmd.Flags().Changed, svc.Settings())
	cfg.Addr, cfg.APIKey, cfg.CORSOrigins, cfg.DefaultMaxTokens = o.addr, o.apiKey, o.cors, o.maxTokens
	if _, err := server.CheckAddr(o.addr, o.apiKey); err != nil {
		svc.Close()
		return nil, fmt.Errorf("%w (the API settings saved in Settings; change them there, or give --addr and --api-key)", err)
	}
	cfg.Models, cfg.UI = svc.Models(), serveUI(svc, logger)
	return &serveHost{
		wait:     func(ctx context.Context) error { _, err := svc.WaitModel(ctx); return err },
		closeAll: svc.Close,
		svc:      svc,
	}, nil
}

// serveUI is the chat UI for serve's browsers: the service's HTTP transport
// and the built frontend. A binary built without the frontend still serves
// the API, and its / says how to build the UI.
func serveUI(svc *service.Service, logger zerolog.Logger) http.Handler {
	dist, err := frontend.Dist()
	if err != nil {
		logger.Warn().Err(err).Msg("serving the API without the chat UI")
		api := service.Handler(svc, nil)
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				api.ServeHTTP(w, r)
				return
			}
			http.Error(w, err.Error(), http.StatusNotFound)
		})
	}
	return service.Handler(svc, dist)
}
