package hub

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

func TestDownloadsStartWatchPauseResume(t *testing.T) {
	h, repo := newHub(t)
	const weights = "model.safetensors"
	h.SetFault(weights, fakehub.Fault{BytesPerSecond: 500_000})
	c := newClient(t, h)
	c.ProgressEvery = 20 * time.Millisecond
	d := &Downloads{Client: c}
	if d.Current() != nil {
		t.Fatal("a download before any Start")
	}
	job, err := d.Start(testRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := d.Start(testRepo, "main"); err != nil || again != job {
		t.Errorf("Start of the running download = %p, %v; want the same job", again, err)
	}
	if _, err := d.Start("mlx-community/Other", ""); err == nil || !strings.Contains(err.Error(), testRepo+" is downloading") {
		t.Errorf("Start of another repository while one runs: %v, want an error naming the running one", err)
	}
	reports, stop := job.Watch()
	defer stop()
	for p := range reports {
		if p.Done > p.Total/3 {
			job.Cancel()
			break
		}
	}
	if _, err := job.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait after Cancel: %v, want context.Canceled", err)
	}
	paused := job.Progress().Done
	if paused == 0 || d.Current() != job {
		t.Fatalf("paused at %d bytes, current %p: want progress kept and the job current", paused, d.Current())
	}

	h.SetFault(weights, fakehub.Fault{})
	job, err = d.Start(testRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	reports, stop = job.Watch()
	defer stop()
	var last Progress
	n := 0
	for p := range reports {
		last = p
		n++
	}
	s, err := job.Wait()
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, c.CacheDir, repo, s)
	if !last.Finished || last.Done != last.Total || n < 1 {
		t.Errorf("last of %d reports %+v: want a finished one", n, last)
	}
	if r := h.Ranges(weights); len(r) != 2 || r[1] == "" {
		t.Errorf("Range headers %q: the second Start should resume", r)
	}
	// A watcher that comes after the end gets the last report at once.
	late, _ := job.Watch()
	if p, ok := <-late; !ok || !p.Finished {
		t.Errorf("late watcher got %+v, %v", p, ok)
	}
	if _, ok := <-late; ok {
		t.Error("a late watcher's channel stays open")
	}
}

func TestTwoPullsOfOneRepositoryFetchEachFileOnce(t *testing.T) {
	h, repo := newHub(t)
	h.SetFault("model.safetensors", fakehub.Fault{BytesPerSecond: 2_000_000})
	c := newClient(t, h)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			_, err := c.Pull(context.Background(), testRepo, PullOptions{})
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if n := h.CDNRequests("model.safetensors"); n != 1 {
		t.Errorf("the weights were fetched %d times; the blob lock should let the second pull wait for the first", n)
	}
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, c.CacheDir, repo, s)
}
