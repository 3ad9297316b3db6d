package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/rs/zerolog/log"
	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/engine"
)

func init() { register(newServeCmd()) }

// serveOptions are the flags of `suzuran serve`.
type serveOptions struct {
	model, addr, backend, apiKey string
	precision                    string
	cors                         []string
	contextTokens, threads       int
	queue                        int
	logRequests                  bool
}

// apiKeyEnv holds the key when it should not show in the process list.
const apiKeyEnv = "SUZURAN_API_KEY"

func newServeCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--model DIR] [--addr 127.0.0.1:PORT] [--backend cpu|emu|metal] [--api-key KEY] [--cors ORIGIN,…] [--ctx N]",
		Short: "Serve the model over an OpenAI- and Anthropic-compatible HTTP API",
		Long: `serve runs the local API without the app: OpenAI's /v1/chat/completions,
/v1/completions, /v1/responses and /v1/models, Anthropic's /v1/messages, and
/health, on ` + server.DefaultAddr + ` unless --addr says otherwise (port 11435: none
of Ollama's 11434, LM Studio's 1234, llama.cpp's 8080, Jan's 1337 or vLLM's 8000).

It binds 127.0.0.1 by default. Binding any other address needs an API key
(--api-key, or the ` + apiKeyEnv + ` environment variable, which keeps it out of
the process list); clients send it as "Authorization: Bearer KEY" or
"x-api-key: KEY". Browser pages may call the API only from the origins given
with --cors.

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
	f.IntVar(&o.queue, "queue", 0, "requests that may wait behind the running one before the API answers 429 (0: 8)")
	f.BoolVar(&o.logRequests, "log-requests", false, "log each request's parameters and timings (never its text or the key) at debug level")
	return cmd
}

func runServe(cmd *cobra.Command, o serveOptions) error {
	if !slices.Contains(engine.Backends(), o.backend) {
		return fmt.Errorf("unknown backend %q: this build has %s", o.backend, strings.Join(engine.Backends(), ", "))
	}
	if err := checkPrecision(cmd, o.backend, o.precision); err != nil {
		return err
	}
	if o.contextTokens < 0 {
		return fmt.Errorf("--ctx %d: must be positive (or 0 for the default)", o.contextTokens)
	}
	dir, err := commandModel(cmd, o.model)
	if err != nil {
		return err
	}
	logger := log.Logger
	if o.logRequests && logger.GetLevel() > zerolog.DebugLevel {
		logger = logger.Level(zerolog.DebugLevel)
	}
	loader := server.NewLoader(dir, engine.LoadOptions{
		Backend: o.backend, Threads: o.threads, ContextTokens: o.contextTokens, QueueSize: o.queue, Precision: o.precision,
	})
	cfg := server.Config{
		Addr: o.addr, APIKey: o.apiKey, CORSOrigins: o.cors, Models: loader,
		Logger: logger, LogRequests: o.logRequests,
	}
	if isDemoModel(dir) {
		// The demo model was trained without thinking.
		off := false
		cfg.ThinkingDefault = &off
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}
	// Listen before loading, so that a taken port fails at once and
	// clients see 503 "loading" rather than a refused connection.
	if err := srv.Start(); err != nil {
		return err
	}
	logger.Info().Str("model", loader.Status().Model).Str("dir", dir).Str("backend", o.backend).Msg("loading the model")
	fmt.Fprintf(cmd.ErrOrStderr(), "serving %s on http://%s/v1\n", dir, srv.Addr())
	start := time.Now()
	loader.Load()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := loader.Wait(ctx); err != nil && !errors.Is(err, context.Canceled) {
		srv.Shutdown(context.Background())
		return fmt.Errorf("loading %s: %w", dir, err)
	}
	if ctx.Err() == nil {
		logger.Info().Dur("took", time.Since(start)).Msg("model ready")
	}
	<-ctx.Done()
	stop()
	logger.Info().Msg("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = srv.Shutdown(shutdownCtx)
	// Wait for a load still running, so the engine it makes is closed.
	loader.Wait(context.Background())
	return errors.Join(err, loader.Close())
}
