package service

import (
	"context"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/internal/soak"
	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/server"
	"github.com/suzuran-app/suzuran/app/store"
)

// TestSoakWithWindowQuestions sends the API soak's 1,000 mixed requests
// from 16 clients to the API server of a Service whose queue holds only 4,
// so that API clients keep it full (they get 429s), while the chat window
// asks its own questions one after the other: every window question is
// answered (complete, without an error), none fails as "busy".
func TestSoakWithWindowQuestions(t *testing.T) {
	const clients, total = 16, 1000
	demo, err := demoDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	svc, err := Open(Options{DatabasePath: filepath.Join(dir, "suzuran.db"), SettingsPath: filepath.Join(dir, "settings.json"),
		Model: demo, Backend: "cpu", Threads: 1, QueueSize: 4, Version: "test", Log: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	waitModel(t, svc, modelhost.StateReady)
	api, err := server.New(server.Config{Addr: "127.0.0.1:0", Models: svc.Models(), MaxBodyBytes: soak.MaxBodyBytes, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	if err := api.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { api.Shutdown(context.Background()) })
	base := "http://" + api.Addr()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}, Timeout: time.Minute}
	var tallyMu sync.Mutex
	tally := map[int]int{}
	var wg sync.WaitGroup
	errs := make(chan error, total)
	next := make(chan int)
	var done atomic.Bool
	for range clients {
		wg.Go(func() {
			for i := range next {
				if err := soak.Send(client, base, i, func(status int) {
					tallyMu.Lock()
					tally[status]++
					tallyMu.Unlock()
				}); err != nil {
					errs <- err
				}
			}
		})
	}
	go func() {
		for _, i := range rand.New(rand.NewPCG(1, 2)).Perm(total) {
			next <- i
		}
		close(next)
		wg.Wait()
		done.Store(true)
	}()

	// The window's questions, one at a time, as long as the soak runs (and
	// at least three).
	ui := svc.UI()
	var replies []store.Message
	for len(replies) < 3 || !done.Load() {
		res, err := ui.Send(SendRequest{Text: soak.Prompts[len(replies)%len(soak.Prompts)] + " (from the window)"})
		if err != nil {
			t.Fatalf("window question %d: %v", len(replies)+1, err)
		}
		replies = append(replies, waitReply(t, svc, res.Reply.ID))
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	t.Logf("API: %d requests from %d clients, statuses %v; window: %d questions", total, clients, tally, len(replies))
	if tally[http.StatusTooManyRequests] == 0 {
		t.Error("no API request met a full queue: the window's questions were not tested against one")
	}
	for i, m := range replies {
		if m.Status != store.StatusComplete || m.Error != "" || m.Content == "" {
			t.Errorf("window question %d: status %s, error %q, %d bytes of answer", i+1, m.Status, m.Error, len(m.Content))
		}
	}
}
