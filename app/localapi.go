package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/service"
)

// localAPI is the tray's "Local API" switch: it starts and stops the HTTP
// server that serves the chat UI to a browser (and, with app/server, the
// OpenAI-compatible API) on the engine the window uses. While it is off no
// port is open.
type localAPI struct {
	log zerolog.Logger
	// ui is the service's browser transport and the built frontend.
	ui http.Handler

	mu  sync.Mutex
	srv apiListener
}

// apiListener is a started server.
type apiListener interface {
	Addr() string
	Shutdown(ctx context.Context) error
}

// newAPIListener starts the server for settings s. This build serves the
// browser UI and its /api transport on loopback only: exposing them on the
// network needs the key checks of the API server (app/server), which
// replaces this function when it is built in.
var newAPIListener = func(s service.Settings, ui http.Handler, log zerolog.Logger) (apiListener, error) {
	if s.APILAN {
		return nil, errors.New("this build cannot expose the API on the network; turn network access off in Settings")
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.APIPort)))
	if err != nil {
		return nil, fmt.Errorf("port %d: %w (choose another port in Settings)", s.APIPort, err)
	}
	srv := &plainListener{srv: &http.Server{Handler: ui, ReadHeaderTimeout: 10 * time.Second}, addr: ln.Addr().String()}
	go func() {
		if err := srv.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("local API server")
		}
	}()
	return srv, nil
}

type plainListener struct {
	srv  *http.Server
	addr string
}

func (p *plainListener) Addr() string                       { return p.addr }
func (p *plainListener) Shutdown(ctx context.Context) error { return p.srv.Shutdown(ctx) }

// Start implements service.APISwitch.
func (a *localAPI) Start(s service.Settings) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv != nil {
		return a.srv.Addr(), nil
	}
	srv, err := newAPIListener(s, a.ui, a.log)
	if err != nil {
		return "", err
	}
	a.srv = srv
	a.log.Info().Str("addr", srv.Addr()).Msg("local API on")
	return srv.Addr(), nil
}

// Stop implements service.APISwitch.
func (a *localAPI) Stop(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv == nil {
		return nil
	}
	err := a.srv.Shutdown(ctx)
	a.srv = nil
	a.log.Info().Msg("local API off")
	return err
}
