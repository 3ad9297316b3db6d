package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/service"
)

// localAPI is the tray's "Local API" switch: it starts and stops the API
// server (app/server: the OpenAI- and Anthropic-compatible API, and the
// chat UI for a browser) on the engine the window uses. While it is off no
// port is open.
type localAPI struct {
	log zerolog.Logger
	// models is the service's engine; ui is the service's browser
	// transport and the built frontend.
	models server.Models
	ui     http.Handler

	mu  sync.Mutex
	srv apiListener
}

// apiListener is a started server.
type apiListener interface {
	Addr() string
	Shutdown(ctx context.Context) error
}

// newAPIListener starts the API server (app/server) for settings s: on
// loopback, or on every interface with the key required when the user
// exposed it to the network; the chat UI is served at / behind the same
// Host, CORS and key checks.
func newAPIListener(s service.Settings, models server.Models, ui http.Handler, log zerolog.Logger) (apiListener, error) {
	host, key := "127.0.0.1", ""
	if s.APILAN {
		if s.APIKey == "" {
			return nil, errors.New("exposing the API on the network needs an API key: save the settings once to make one")
		}
		host, key = "0.0.0.0", s.APIKey
	}
	srv, err := server.New(server.Config{
		Addr:        net.JoinHostPort(host, strconv.Itoa(s.APIPort)),
		APIKey:      key,
		CORSOrigins: s.APICORSOrigins,
		Models:      models,
		// A request without max_tokens must not hold a batch slot for a
		// whole context.
		DefaultMaxTokens: s.APIMaxTokens,
		UI:               ui,
		Logger:           log,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.Start(); err != nil {
		return nil, fmt.Errorf("port %d: %w (choose another port in Settings)", s.APIPort, err)
	}
	return srv, nil
}

// Start implements service.APISwitch.
func (a *localAPI) Start(s service.Settings) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.srv != nil {
		return a.srv.Addr(), nil
	}
	srv, err := newAPIListener(s, a.models, a.ui, a.log)
	if err != nil {
		return "", err
	}
	a.srv = srv
	a.log.Info().Str("addr", srv.Addr()).Msg("local API on")
	return reachableAddr(srv.Addr()), nil
}

// reachableAddr turns a listen address on every interface (0.0.0.0:port)
// into one that other computers can use: this machine's first LAN address.
func reachableAddr(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || !net.ParseIP(host).IsUnspecified() {
		return addr
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ip, ok := a.(*net.IPNet); ok && ip.IP.To4() != nil && !ip.IP.IsLoopback() && !ip.IP.IsLinkLocalUnicast() {
			return net.JoinHostPort(ip.IP.String(), port)
		}
	}
	return net.JoinHostPort("127.0.0.1", port)
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
