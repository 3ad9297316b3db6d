package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// What a shared cache, a hostile mirror or a typed revision must not be
// able to do, and how quickly an unreachable hub is given up on.

// TestPartialDownloadDoesNotWriteThroughLinks plants a symbolic link and a
// hard link where the weights' partial download goes: the pull refuses
// them, and the files they lead to keep their contents.
func TestPartialDownloadDoesNotWriteThroughLinks(t *testing.T) {
	for _, kind := range []string{"symbolic link", "hard link"} {
		t.Run(kind, func(t *testing.T) {
			h, repo := newHub(t)
			c := newClient(t, h)
			partial := c.Cache().BlobPath(testRepo, repo.Files["model.safetensors"].SHA256) + ".incomplete"
			if err := os.MkdirAll(filepath.Dir(partial), 0o755); err != nil {
				t.Fatal(err)
			}
			victim := filepath.Join(t.TempDir(), "precious.txt")
			const contents = "another tool's file, which a download must not touch\n"
			if err := os.WriteFile(victim, []byte(contents), 0o644); err != nil {
				t.Fatal(err)
			}
			link := os.Symlink
			if kind == "hard link" {
				link = os.Link
			}
			if err := link(victim, partial); err != nil {
				t.Skipf("cannot make a %s from %s to %s: %v", kind, partial, victim, err)
			}
			_, err := c.Pull(context.Background(), testRepo, PullOptions{})
			if err == nil || !strings.Contains(err.Error(), kind) || !strings.Contains(err.Error(), "Remove it") {
				t.Fatalf("err = %v, want a refusal naming the %s and what to do", err, kind)
			}
			got, rerr := os.ReadFile(victim)
			if rerr != nil || string(got) != contents {
				t.Fatalf("the %s's target now holds %q (%v), want it untouched", kind, got, rerr)
			}
			t.Log(err)
		})
	}
}

// treeServer is a hub API that answers the revision call with a commit and
// every tree page with an empty page whose Link header next(r) names ("" for
// none). It counts the tree requests and keeps the Authorization headers.
type treeServer struct {
	*httptest.Server
	mu    sync.Mutex
	pages int
	auth  []string
}

const treeCommit = "0123456789abcdef0123456789abcdef01234567"

func newTreeServer(t *testing.T, next func(s *treeServer, r *http.Request) string) *treeServer {
	s := &treeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auth = append(s.auth, r.Header.Get("Authorization"))
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/revision/") {
			fmt.Fprintf(w, `{"sha": %q}`, treeCommit)
			return
		}
		s.mu.Lock()
		s.pages++
		s.mu.Unlock()
		if link := next(s, r); link != "" {
			w.Header().Set("Link", "<"+link+`>; rel="next"`)
		}
		fmt.Fprint(w, `[]`)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *treeServer) tokensSent() (sent, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.auth {
		if a != "" {
			sent++
		}
	}
	return sent, len(s.auth)
}

func treeClient(t *testing.T, endpoint string) *Client {
	return &Client{Config: Config{Endpoint: endpoint, CacheDir: t.TempDir(), Token: "hf_secret"}, RetryBase: time.Millisecond, Retries: 1}
}

func TestTreePagination(t *testing.T) {
	t.Run("a page linking to itself", func(t *testing.T) {
		s := newTreeServer(t, func(s *treeServer, r *http.Request) string { return s.URL + r.URL.RequestURI() })
		_, err := treeClient(t, s.URL).List(context.Background(), testRepo, "main")
		if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "already sent") {
			t.Fatalf("err = %v, want ErrServer saying the listing came back to a page", err)
		}
		if s.pages != 1 {
			t.Errorf("%d tree pages requested, want 1 (the loop is seen before the second request)", s.pages)
		}
	})
	t.Run("pages that never end", func(t *testing.T) {
		s := newTreeServer(t, func(s *treeServer, r *http.Request) string {
			n, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
			return fmt.Sprintf("%s%s?cursor=%d", s.URL, r.URL.Path, n+1)
		})
		_, err := treeClient(t, s.URL).List(context.Background(), testRepo, "main")
		if !errors.Is(err, ErrServer) || !strings.Contains(err.Error(), "more than "+strconv.Itoa(maxTreePages)+" pages") {
			t.Fatalf("err = %v, want ErrServer naming the page limit", err)
		}
		if s.pages != maxTreePages {
			t.Errorf("%d tree pages requested, want %d", s.pages, maxTreePages)
		}
	})
	t.Run("a next page on another host", func(t *testing.T) {
		foreign := newTreeServer(t, func(*treeServer, *http.Request) string { return "" })
		hub := newTreeServer(t, func(_ *treeServer, r *http.Request) string { return foreign.URL + r.URL.RequestURI() })
		if _, err := treeClient(t, hub.URL).List(context.Background(), testRepo, "main"); err != nil {
			t.Fatal(err)
		}
		if sent, total := hub.tokensSent(); sent != total || total != 2 {
			t.Errorf("the hub got the token on %d of %d requests, want 2 of 2", sent, total)
		}
		if sent, total := foreign.tokensSent(); sent != 0 || total != 1 {
			t.Errorf("the other host got the token on %d of %d requests, want 0 of 1", sent, total)
		}
	})
}

func TestCheckRevision(t *testing.T) {
	for _, ok := range []string{"main", "v1.0", "refs/pr/1", "feature/long-context", "release-2026.05", treeCommit} {
		if err := CheckRevision(ok); err != nil {
			t.Errorf("CheckRevision(%q) = %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"", "..", "../../../etc/x", "a/../b", ".hidden", "a/.b", "x.lock", "a//b", "/a", "a/",
		"a b", "a~1", "a^", "a:b", "a?", "a*", "a[b", `a\b`, "@", "a@{1}", "x.", "a\x01b", "a\x7fb", strings.Repeat("a", 256)} {
		err := CheckRevision(bad)
		if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "not a revision") {
			t.Errorf("CheckRevision(%q) = %v, want an error saying it is not a revision", bad, err)
		}
	}
}

// TestRevisionCannotLeaveTheCache pulls and plans with a revision that
// climbs out of refs/: it is refused before any request, and nothing is
// written or read outside the cache.
func TestRevisionCannotLeaveTheCache(t *testing.T) {
	h, repo := newHub(t)
	c := newClient(t, h)
	outside := filepath.Join(filepath.Dir(c.CacheDir), "escaped")
	revision := "../../../" + filepath.Base(outside)
	if _, err := c.Pull(context.Background(), testRepo, PullOptions{Revision: revision}); err == nil || !strings.Contains(err.Error(), "not a revision") {
		t.Fatalf("Pull: err = %v, want the revision refused", err)
	}
	if _, err := c.Plan(context.Background(), testRepo, revision); err == nil || !strings.Contains(err.Error(), "not a revision") {
		t.Fatalf("Plan: err = %v, want the revision refused", err)
	}
	if n := h.APIRequests() + h.FileRequests(); n != 0 {
		t.Errorf("%d requests for a revision that is not one, want 0", n)
	}
	if _, err := os.Lstat(outside); err == nil {
		t.Errorf("%s was written", outside)
	}
	if err := c.Cache().WriteRef(testRepo, revision, repo.Commit); err == nil {
		t.Error("WriteRef took the revision")
	}
	// A file that the revision would reach, holding a commit id, is not
	// taken for a ref.
	if err := os.WriteFile(outside, []byte(repo.Commit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(c.Cache().RepoDir(testRepo), "refs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if commit, ok := c.Cache().ResolveRevision(testRepo, revision); ok {
		t.Errorf("ResolveRevision read %s outside the cache: %s", outside, commit)
	}
}

// refusedEndpoint is the URL of a loopback port that nothing listens on.
func refusedEndpoint(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestUnreachableHubFallsBackAtOnce: with the hub's connection refused or
// its name unknown (".invalid" never resolves, RFC 2606), Pull and Plan of
// a cached model answer from the cache at once, with the default retries
// (which wait about a minute for a hub that answers with errors). The 2 s
// bound is the issue's: the answer takes milliseconds, so a loaded
// machine has ample room.
func TestUnreachableHubFallsBackAtOnce(t *testing.T) {
	for name, endpoint := range map[string]string{"connection refused": refusedEndpoint(t), "unknown name": "http://hub.invalid"} {
		t.Run(name, func(t *testing.T) {
			h, repo := newHub(t)
			c := newClient(t, h)
			c.Endpoint, c.Retries, c.RetryBase = endpoint, 0, 0
			snap := hfCacheCopy(t, c.CacheDir, repo)

			start := time.Now()
			s, err := c.Pull(context.Background(), testRepo, PullOptions{})
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Pull took %s, want under 2 s", took)
			}
			if err != nil || !s.FromCache || s.Dir != snap {
				t.Fatalf("Pull: %+v, %v; want the cached snapshot %s", s, err, snap)
			}

			start = time.Now()
			p, err := c.Plan(context.Background(), testRepo, "")
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Plan took %s, want under 2 s", took)
			}
			if err != nil || !p.Cached || !strings.HasPrefix(p.Offline, "offline: cannot reach "+endpoint) {
				t.Fatalf("Plan: %+v, %v; want the cached copy, saying it is offline", p, err)
			}

			os.RemoveAll(c.CacheDir)
			start = time.Now()
			_, err = c.Pull(context.Background(), testRepo, PullOptions{})
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("Pull without a cached copy took %s, want under 2 s", took)
			}
			if !errors.Is(err, ErrNetwork) || !strings.Contains(err.Error(), "offline: cannot reach") || !strings.Contains(err.Error(), "check the internet connection") {
				t.Fatalf("err = %v, want ErrNetwork saying the hub cannot be reached and what to check", err)
			}
		})
	}
}

// TestDeadlineIsANetworkError: a hub that accepts and never answers keeps
// the caller waiting until its deadline, and the error then says the hub
// did not answer, as a network error.
func TestDeadlineIsANetworkError(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stall)
	c := treeClient(t, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := c.Plan(ctx, testRepo, "")
	if !errors.Is(err, ErrNetwork) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("err = %v, want ErrNetwork saying the hub did not answer in time", err)
	}
}
