package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog/log"
	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/frontend"
)

// uiOptions are the flags of `suzuran ui`.
type uiOptions struct {
	addr, model, backend, database, settings string
	threads                                  int
	pace                                     time.Duration
}

func newUICmd() *cobra.Command {
	var o uiOptions
	cmd := &cobra.Command{
		Use:   "ui [--addr HOST:PORT] [--model DIR] [--db FILE] [--settings FILE]",
		Short: "Serve the chat window to a browser on this computer",
		Long: `ui serves the chat window to a web browser, on the same conversations,
settings and engine as the desktop app (its database and settings.json
unless --db and --settings say otherwise). It listens on a loopback address
only: the chat has no login, so it is for this computer's own browser.

It prints the address to open, and stops on Ctrl-C or SIGTERM.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runUI(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.addr, "addr", "127.0.0.1:8090", "loopback address to listen on (port 0 picks a free one)")
	f.StringVar(&o.model, "model", "", "model folder (default: the configured model, else the demo model)")
	f.StringVar(&o.backend, "backend", defaultBackend(), "backend to run on: "+backendChoices())
	f.StringVar(&o.database, "db", "", "conversation database (default: the app's)")
	f.StringVar(&o.settings, "settings", "", "settings file (default: the app's settings.json)")
	f.IntVar(&o.threads, "threads", 0, "CPU threads (0: all cores)")
	f.DurationVar(&o.pace, "pace", 0, "pause after each token, to stream a small model at the full model's speed (10ms is about 100 tokens/s)")
	return cmd
}

func runUI(cmd *cobra.Command, o uiOptions) error {
	host, _, err := net.SplitHostPort(o.addr)
	if err != nil {
		return fmt.Errorf("--addr %q: write host:port, such as 127.0.0.1:8090", o.addr)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("--addr %q: the browser UI has no login, so it listens on a loopback address only (127.0.0.1, ::1 or localhost)", o.addr)
	}
	if o.pace < 0 || o.pace > time.Second {
		return fmt.Errorf("--pace %v: use 0 to 1s", o.pace)
	}
	if o.threads < 0 {
		return fmt.Errorf("--threads %d: use 0 (all cores) or more", o.threads)
	}
	dist, err := frontend.Dist()
	if err != nil {
		return err
	}
	model := o.model
	if model != "" {
		if model, err = commandModel(cmd, model); err != nil {
			return err
		}
	}
	svc, err := service.Open(service.Options{
		DatabasePath: o.database,
		SettingsPath: o.settings,
		Model:        model,
		Backend:      o.backend,
		Threads:      o.threads,
		Pace:         o.pace,
		Version:      version,
		Log:          log.Logger.With().Str("part", "service").Logger(),
	})
	if err != nil {
		return err
	}
	defer svc.Close()

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", o.addr, err)
	}
	// Requests run under base, so that cancelling it at shutdown ends the
	// event streams, which otherwise stay open as long as the browser does.
	base, endRequests := context.WithCancel(context.Background())
	defer endRequests()
	srv := &http.Server{
		Handler:           service.Handler(svc, dist),
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Suzuran at http://%s\n", ln.Addr())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(stop)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-stop:
	}
	endRequests()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
