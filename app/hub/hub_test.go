package hub

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/synth"
)

// fixture is the tiny model of the real architecture, in the MLX layout the
// app downloads.
var fixture = filepath.Join("..", "..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")

const testRepo = "mlx-community/Qwen3.6-tiny-4bit"

// TestMain doubles as the helper process of the SIGKILL test: with
// HUB_TEST_PULL set it pulls that repository and exits.
func TestMain(m *testing.M) {
	zerolog.SetGlobalLevel(zerolog.InfoLevel) // the retries' debug lines
	if repo := os.Getenv("HUB_TEST_PULL"); repo != "" {
		cfg, err := ConfigFromEnv()
		if err == nil {
			c := NewClient(cfg)
			c.DiskMargin = 1
			_, err = c.Pull(context.Background(), repo, PullOptions{})
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// newHub starts a fake hub holding the fixture model.
func newHub(t *testing.T) (*fakehub.Hub, *fakehub.Repo) {
	h := fakehub.New(t)
	return h, h.AddDir(t, testRepo, fixture)
}

// newClient is a client of h with an empty cache, quick retries and no
// disk margin to speak of (the test machine's disk may be small).
func newClient(t *testing.T, h *fakehub.Hub) *Client {
	return &Client{
		Config:     Config{Endpoint: h.URL, CacheDir: t.TempDir(), TokenFile: "/home/me/.cache/huggingface/token"},
		RetryBase:  time.Millisecond,
		Retries:    3,
		DiskMargin: 1,
	}
}

func fixtureBytes(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixture, name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkSnapshot asserts that dir is the repository's commit laid out as
// huggingface_hub lays it out, with the fixture's exact bytes.
func checkSnapshot(t *testing.T, cacheDir string, repo *fakehub.Repo, s *Snapshot) {
	t.Helper()
	repoDir := filepath.Join(cacheDir, "models--mlx-community--Qwen3.6-tiny-4bit")
	if want := filepath.Join(repoDir, "snapshots", repo.Commit); s.Dir != want {
		t.Fatalf("snapshot dir %s, want %s", s.Dir, want)
	}
	ref, err := os.ReadFile(filepath.Join(repoDir, "refs", "main"))
	if err != nil || string(ref) != repo.Commit {
		t.Fatalf("refs/main = %q (%v), want %s", ref, err, repo.Commit)
	}
	entries, _ := os.ReadDir(fixture)
	for _, e := range entries {
		f := repo.Files[e.Name()]
		link := filepath.Join(s.Dir, e.Name())
		target, err := os.Readlink(link)
		if err != nil {
			t.Fatalf("%s is not a symlink: %v", e.Name(), err)
		}
		if want := "../../blobs/" + f.SHA256; f.LFS && target != want {
			t.Errorf("%s -> %s, want %s (LFS files are named by SHA-256)", e.Name(), target, want)
		}
		if want := "../../blobs/" + f.GitID; !f.LFS && target != want {
			t.Errorf("%s -> %s, want %s (small files are named by git blob id)", e.Name(), target, want)
		}
		got, err := os.ReadFile(link)
		if err != nil || string(got) != string(fixtureBytes(t, e.Name())) {
			t.Errorf("%s: contents differ from the fixture (%v)", e.Name(), err)
		}
	}
	for _, skipped := range []string{"README.md", ".gitattributes"} {
		if _, err := os.Lstat(filepath.Join(s.Dir, skipped)); err == nil {
			t.Errorf("%s was downloaded; only model files should be", skipped)
		}
	}
	leftovers, _ := filepath.Glob(filepath.Join(repoDir, "blobs", "*.incomplete"))
	if len(leftovers) > 0 {
		t.Errorf("partial files left: %v", leftovers)
	}
}

func TestPullDownloadsIntoTheHFCacheLayout(t *testing.T) {
	h, repo := newHub(t)
	c := newClient(t, h)
	c.ProgressEvery = time.Millisecond
	var mu sync.Mutex
	var reports []Progress
	s, err := c.Pull(context.Background(), testRepo, PullOptions{Progress: func(p Progress) {
		mu.Lock()
		reports = append(reports, p)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, c.CacheDir, repo, s)
	if err := Validate(s.Dir); err != nil {
		t.Fatal(err)
	}
	var total int64
	for name, f := range repo.Files {
		if wanted(name) {
			total += int64(len(f.Data))
			if n := h.Resolves(name); n != 1 {
				t.Errorf("%s resolved %d times, want 1", name, n)
			}
		}
	}
	if s.Size != total || s.Fetched != total {
		t.Errorf("snapshot size %d fetched %d, want %d", s.Size, s.Fetched, total)
	}
	if n := h.CDNRequests("model.safetensors"); n != 1 {
		t.Errorf("model.safetensors fetched %d times from the CDN, want 1 (through the resolve redirect)", n)
	}
	if h.Resolves("README.md") != 0 {
		t.Error("README.md was requested")
	}
	last := reports[len(reports)-1]
	if !last.Finished || last.Done != total || last.Total != total || last.FilesDone != last.FilesTotal || last.FilesTotal != 6 {
		t.Errorf("last progress report %+v, want finished with %d of %d bytes and 6 of 6 files", last, total, total)
	}
	for i := 1; i < len(reports); i++ {
		if reports[i].Done < reports[i-1].Done || reports[i].Done > total {
			t.Fatalf("progress went from %d to %d bytes (total %d)", reports[i-1].Done, reports[i].Done, total)
		}
	}
}

// TestPullResumesAfterSIGKILL kills a pulling process mid-file and pulls
// again: the finished files are not requested again and the partial file
// goes on from where it stopped, with a Range request.
func TestPullResumesAfterSIGKILL(t *testing.T) {
	h, repo := newHub(t)
	const weights = "model.safetensors"
	size := int64(len(repo.Files[weights].Data))
	h.SetFault(weights, fakehub.Fault{BytesPerSecond: 400_000})
	cacheDir := t.TempDir()
	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), "HUB_TEST_PULL="+testRepo, "HF_ENDPOINT="+h.URL, "HF_HUB_CACHE="+cacheDir, "HF_TOKEN=", "HF_HUB_OFFLINE=")
	helper.Stderr = os.Stderr
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	blobs := filepath.Join(cacheDir, "models--mlx-community--Qwen3.6-tiny-4bit", "blobs")
	partial := filepath.Join(blobs, repo.Files[weights].SHA256+".incomplete")
	// smallDone reports whether every other file is in blobs: those must
	// not be fetched again after the kill.
	smallDone := func() bool {
		for name, f := range repo.Files {
			if name != weights && wanted(name) {
				if _, err := os.Stat(filepath.Join(blobs, f.GitID)); err != nil {
					return false
				}
			}
		}
		return true
	}
	deadline := time.Now().Add(30 * time.Second)
	var killedAt int64
	for {
		st, err := os.Stat(partial)
		if err == nil && st.Size() >= size/4 && smallDone() {
			if err := helper.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			helper.Wait()
			st, _ = os.Stat(partial)
			killedAt = st.Size()
			break
		}
		if time.Now().After(deadline) {
			helper.Process.Kill()
			t.Fatalf("the helper did not get a quarter of %s in 30 s", weights)
		}
		time.Sleep(20 * time.Millisecond) // another process writes the file: its size is read again
	}
	if killedAt >= size {
		t.Fatalf("the helper finished %s before it was killed; slow the fake hub down", weights)
	}
	t.Logf("killed with %d of %d bytes of %s", killedAt, size, weights)
	done := map[string]bool{}
	for name := range repo.Files {
		if name != weights && wanted(name) {
			if h.Resolves(name) != 1 {
				t.Fatalf("%s: %d requests before the kill, want 1", name, h.Resolves(name))
			}
			done[name] = true
		}
	}
	h.SetFault(weights, fakehub.Fault{})
	c := newClient(t, h)
	c.CacheDir = cacheDir
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, cacheDir, repo, s)
	for name := range done {
		if n := h.Resolves(name); n != 1 {
			t.Errorf("%s was requested again after the restart (%d requests in all)", name, n)
		}
	}
	ranges := h.Ranges(weights)
	if want := fmt.Sprintf("bytes=%d-", killedAt); len(ranges) != 2 || ranges[1] != want {
		t.Errorf("Range headers for %s: %q, want a second request with %q", weights, ranges, want)
	}
	if s.Fetched != size-killedAt {
		t.Errorf("the resumed pull fetched %d bytes, want the %d that were missing", s.Fetched, size-killedAt)
	}
}

func TestCorruptedFileIsFetchedAgainAndNeverPlaced(t *testing.T) {
	const weights = "model.safetensors"
	t.Run("once", func(t *testing.T) {
		h, repo := newHub(t)
		h.SetFault(weights, fakehub.Fault{Corrupt: true, Times: 1})
		c := newClient(t, h)
		s, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		checkSnapshot(t, c.CacheDir, repo, s)
		if n := h.CDNRequests(weights); n != 2 {
			t.Errorf("%s fetched %d times, want 2 (once damaged, once intact)", weights, n)
		}
		if r := h.Ranges(weights); r[1] != "" {
			t.Errorf("the second fetch asked for %q; after a bad checksum the whole file must come again", r[1])
		}
	})
	t.Run("always", func(t *testing.T) {
		h, repo := newHub(t)
		h.SetFault(weights, fakehub.Fault{Corrupt: true})
		c := newClient(t, h)
		_, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if !errors.Is(err, ErrChecksum) || !strings.Contains(err.Error(), weights) {
			t.Fatalf("err = %v, want ErrChecksum naming %s", err, weights)
		}
		t.Log(err)
		cache := c.Cache()
		if _, err := os.Lstat(filepath.Join(cache.SnapshotDir(testRepo, repo.Commit), weights)); err == nil {
			t.Error("the damaged file was linked into the snapshot")
		}
		if _, err := os.Stat(cache.BlobPath(testRepo, repo.Files[weights].SHA256)); err == nil {
			t.Error("the damaged file was moved into blobs")
		}
		c.Retries = 10
		h.ResetCounts()
		c.Pull(context.Background(), testRepo, PullOptions{})
		if n := h.CDNRequests(weights); n != checksumRetries+1 {
			t.Errorf("%d fetches, want %d (the first and %d more, whatever Retries says)", n, checksumRetries+1, checksumRetries)
		}
	})
}

func TestDroppedConnectionsResume(t *testing.T) {
	tests := []struct {
		file string
		drop int64
	}{
		{"model.safetensors", 300_000}, // LFS, through the CDN redirect
		{"tokenizer.json", 20_000},     // served by resolve itself
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			h, repo := newHub(t)
			h.SetFault(tt.file, fakehub.Fault{DropAfter: tt.drop, Times: 2})
			c := newClient(t, h)
			s, err := c.Pull(context.Background(), testRepo, PullOptions{})
			if err != nil {
				t.Fatal(err)
			}
			checkSnapshot(t, c.CacheDir, repo, s)
			want := []string{"", fmt.Sprintf("bytes=%d-", tt.drop), fmt.Sprintf("bytes=%d-", 2*tt.drop)}
			if got := h.Ranges(tt.file); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("Range headers %q, want %q", got, want)
			}
			if sent, size := h.Sent(tt.file), int64(len(repo.Files[tt.file].Data)); sent != size {
				t.Errorf("the hub sent %d bytes of a %d-byte file: a resume must not fetch bytes again", sent, size)
			}
		})
	}
}

func TestStalledConnectionIsDroppedAndResumed(t *testing.T) {
	const weights = "model.safetensors"
	h, repo := newHub(t)
	h.SetFault(weights, fakehub.Fault{StallAfter: 400_000, Times: 1})
	c := newClient(t, h)
	c.StallTimeout = 300 * time.Millisecond
	start := time.Now()
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, c.CacheDir, repo, s)
	if got := h.Ranges(weights); fmt.Sprint(got) != fmt.Sprint([]string{"", "bytes=400000-"}) {
		t.Errorf("Range headers %q, want a resume at 400000 after the stall", got)
	}
	// The stall costs StallTimeout, not the 60 s default: the watchdog
	// fired. 5 s leaves room for a loaded machine.
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the pull took %s", d)
	}
}

func TestServerIgnoringRangeRestartsTheFile(t *testing.T) {
	// The first answer breaks off at 300 kB; the second ignores the Range
	// of the resume (as some proxies do) and sends the whole file, which
	// breaks off at 300 kB again; the third resumes properly.
	const weights = "model.safetensors"
	h, repo := newHub(t)
	h.SetFault(weights, fakehub.Fault{DropAfter: 300_000, IgnoreRange: true, Times: 2})
	c := newClient(t, h)
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, c.CacheDir, repo, s)
	if got, want := h.Ranges(weights), []string{"", "bytes=300000-", "bytes=300000-"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Range headers %q, want %q", got, want)
	}
	if sent, want := h.Sent(weights), int64(len(repo.Files[weights].Data))+300_000; sent != want {
		t.Errorf("sent %d bytes, want %d: the whole file once, plus the 300 kB the Range-ignoring answer repeated", sent, want)
	}
}

func TestHubErrors(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(h *fakehub.Hub, c *Client)
		repo     string
		revision string
		kind     error
		says     []string
	}{
		{"401 without a token", func(h *fakehub.Hub, c *Client) {
			h.SetFault("config.json", fakehub.Fault{Status: 401})
		}, testRepo, "", ErrAuth, []string{"needs a Hugging Face token", "HF_TOKEN", "/home/me/.cache/huggingface/token"}},
		{"401 with a token", func(h *fakehub.Hub, c *Client) {
			c.Token = "hf_old"
			h.SetFault("config.json", fakehub.Fault{Status: 401})
		}, testRepo, "", ErrAuth, []string{"refused the token", "HF_TOKEN"}},
		{"403 gated", func(h *fakehub.Hub, c *Client) {
			c.Token = "hf_mine"
			h.SetFault("config.json", fakehub.Fault{Status: 403})
		}, testRepo, "", ErrAuth, []string{"gated or private", "accept its terms"}},
		{"private repository without the token", func(h *fakehub.Hub, c *Client) {
			h.Token = "hf_secret"
		}, testRepo, "", ErrNotFound, []string{"no such model", "if it is private", "HF_TOKEN"}},
		{"404 unknown repository", func(h *fakehub.Hub, c *Client) {
			c.Token = "hf_mine"
		}, "mlx-community/No-Such-Model", "", ErrNotFound, []string{"mlx-community/No-Such-Model: no such model", "check the name"}},
		{"404 unknown revision", nil, testRepo, "v9", ErrNotFound, []string{`no revision "v9"`}},
		{"bad repository name", nil, "Qwen3.6", "", ErrNotFound, []string{"owner/name"}},
		{"500 on every try", func(h *fakehub.Hub, c *Client) {
			h.SetFault("model.safetensors", fakehub.Fault{Status: 500})
		}, testRepo, "", ErrServer, []string{"model.safetensors", "500", "try again later"}},
		{"500 from the API on every try", func(h *fakehub.Hub, c *Client) {
			h.SetAPIFault(fakehub.Fault{Status: 503})
		}, testRepo, "", ErrServer, []string{"503"}},
		{"hub out of reach", func(h *fakehub.Hub, c *Client) {
			h.Close()
		}, testRepo, "", ErrNetwork, []string{"cannot reach", "internet connection"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := newHub(t)
			c := newClient(t, h)
			if tt.setup != nil {
				tt.setup(h, c)
			}
			_, err := c.Pull(context.Background(), tt.repo, PullOptions{Revision: tt.revision})
			if !errors.Is(err, tt.kind) {
				t.Fatalf("err = %v, want kind %v", err, tt.kind)
			}
			for _, s := range tt.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
			if h.CDNRequests("model.safetensors") > 0 && tt.kind != ErrServer {
				t.Error("weights were fetched despite the error")
			}
		})
	}
}

func TestTokenAndCommitRevision(t *testing.T) {
	h, repo := newHub(t)
	h.Token = "hf_secret"
	c := newClient(t, h)
	c.Token = "hf_secret"
	s, err := c.Pull(context.Background(), testRepo, PullOptions{Revision: repo.Commit})
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir != c.Cache().SnapshotDir(testRepo, repo.Commit) || Validate(s.Dir) != nil {
		t.Fatalf("snapshot %s", s.Dir)
	}
	if _, err := os.Stat(filepath.Join(c.Cache().RepoDir(testRepo), "refs", repo.Commit)); err == nil {
		t.Error("a ref was written for a commit id")
	}
	if _, err := c.Pull(context.Background(), testRepo, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	if commit, ok := c.Cache().ResolveRevision(testRepo, "main"); !ok || commit != repo.Commit {
		t.Errorf("refs/main = %s, %v", commit, ok)
	}
}

func TestTransientServerErrorsAreRetried(t *testing.T) {
	h, repo := newHub(t)
	h.SetAPIFault(fakehub.Fault{Status: 502, Times: 2})
	h.SetFault("model.safetensors", fakehub.Fault{Status: 500, Times: 2})
	c := newClient(t, h)
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, c.CacheDir, repo, s)
	if n := h.Resolves("model.safetensors"); n != 3 {
		t.Errorf("model.safetensors resolved %d times, want 3 (two 500s, then the file)", n)
	}
}

func TestAnotherArchitectureIsRefusedBeforeItsWeights(t *testing.T) {
	h := fakehub.New(t)
	h.Add("meta-llama/Llama-3.2-1B", map[string][]byte{
		"config.json":       []byte(`{"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":2048}`),
		"model.safetensors": make([]byte, 4096),
		"tokenizer.json":    []byte(`{}`),
	})
	c := newClient(t, h)
	_, err := c.Pull(context.Background(), "meta-llama/Llama-3.2-1B", PullOptions{})
	if !errors.Is(err, ErrArchitecture) || !strings.Contains(err.Error(), "llama") || !strings.Contains(err.Error(), DefaultRepo) {
		t.Fatalf("err = %v, want ErrArchitecture naming llama and suggesting %s", err, DefaultRepo)
	}
	t.Log(err)
	if n := h.Resolves("model.safetensors") + h.Resolves("tokenizer.json"); n != 0 {
		t.Errorf("%d requests for other files after config.json; the weights must not be fetched", n)
	}
}

// hfCacheCopy lays the fixture out in cacheDir as `hf download` does,
// written here by hand rather than with Cache so that the test holds the
// format, not this package, to account.
func hfCacheCopy(t *testing.T, cacheDir string, repo *fakehub.Repo) string {
	repoDir := filepath.Join(cacheDir, "models--mlx-community--Qwen3.6-tiny-4bit")
	snap := filepath.Join(repoDir, "snapshots", repo.Commit)
	for _, d := range []string{filepath.Join(repoDir, "blobs"), filepath.Join(repoDir, "refs"), snap} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, f := range repo.Files {
		blob := f.GitID
		if f.LFS {
			blob = f.SHA256
		}
		if err := os.WriteFile(filepath.Join(repoDir, "blobs", blob), f.Data, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../../blobs/"+blob, filepath.Join(snap, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(repoDir, "refs", "main"), []byte(repo.Commit), 0o644); err != nil {
		t.Fatal(err)
	}
	return snap
}

func TestExistingCacheCopyIsReusedWithoutRequestingItsFiles(t *testing.T) {
	h, repo := newHub(t)
	c := newClient(t, h)
	snap := hfCacheCopy(t, c.CacheDir, repo)
	plan, err := c.Plan(context.Background(), testRepo, "")
	if err != nil {
		t.Fatal(err)
	}
	if !plan.Cached || plan.ToDownload != 0 || plan.Dir != snap {
		t.Errorf("plan %+v: want cached, nothing to download, in %s", plan, snap)
	}
	s, err := c.Download(context.Background(), plan.Listing, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Dir != snap || s.Fetched != 0 {
		t.Errorf("snapshot %s fetched %d bytes, want %s and 0", s.Dir, s.Fetched, snap)
	}
	if n := h.FileRequests(); n != 0 {
		t.Errorf("%d requests for files already in the cache, want 0", n)
	}
}

func TestOffline(t *testing.T) {
	t.Run("with a cached copy", func(t *testing.T) {
		h, repo := newHub(t)
		c := newClient(t, h)
		snap := hfCacheCopy(t, c.CacheDir, repo)
		c.Offline = true
		s, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Dir != snap || !s.FromCache {
			t.Errorf("got %+v, want the cached snapshot %s", s, snap)
		}
		if n := h.APIRequests() + h.FileRequests(); n != 0 {
			t.Errorf("%d requests while offline, want 0", n)
		}
	})
	t.Run("without a cached copy", func(t *testing.T) {
		h, _ := newHub(t)
		c := newClient(t, h)
		c.Offline = true
		_, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if !errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), "HF_HUB_OFFLINE") {
			t.Fatalf("err = %v, want ErrOffline naming HF_HUB_OFFLINE", err)
		}
		if n := h.APIRequests() + h.FileRequests(); n != 0 {
			t.Errorf("%d requests while offline, want 0", n)
		}
	})
	t.Run("with an incomplete cached copy", func(t *testing.T) {
		h, repo := newHub(t)
		c := newClient(t, h)
		snap := hfCacheCopy(t, c.CacheDir, repo)
		os.Remove(filepath.Join(snap, "model.safetensors"))
		c.Offline = true
		_, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if !errors.Is(err, ErrOffline) || !strings.Contains(err.Error(), "incomplete") {
			t.Fatalf("err = %v, want ErrOffline saying the copy is incomplete", err)
		}
	})
	t.Run("hub out of reach with a cached copy", func(t *testing.T) {
		h, repo := newHub(t)
		c := newClient(t, h)
		snap := hfCacheCopy(t, c.CacheDir, repo)
		h.Close()
		s, err := c.Pull(context.Background(), testRepo, PullOptions{})
		if err != nil || s.Dir != snap || !s.FromCache {
			t.Fatalf("got %+v, %v; want the cached snapshot %s", s, err, snap)
		}
	})
}

func TestCancelPausesAndPullResumes(t *testing.T) {
	h, repo := newHub(t)
	const weights = "model.safetensors"
	h.SetFault(weights, fakehub.Fault{BytesPerSecond: 1_000_000})
	c := newClient(t, h)
	c.ProgressEvery = 10 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	_, err := c.Pull(ctx, testRepo, PullOptions{Progress: func(p Progress) {
		if p.Done > p.Total/2 {
			cancel()
		}
	}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	h.SetFault(weights, fakehub.Fault{})
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkSnapshot(t, c.CacheDir, repo, s)
	if r := h.Ranges(weights); len(r) != 2 || r[1] == "" {
		t.Errorf("Range headers %q: the second pull should resume the paused file", r)
	}
}

// TestRealConfigsPassTheArchitectureCheck runs the check Download makes
// before fetching weights on the config.json files of the real
// repositories (mlx-community/Qwen3.6-35B-A3B-4bit, the default, and
// Qwen/Qwen3.6-35B-A3B): a check that refused them would refuse the model
// the app is for.
func TestRealConfigsPassTheArchitectureCheck(t *testing.T) {
	for name, raw := range map[string][]byte{
		DefaultRepo:            synth.FullSizeConfig(),
		"Qwen/Qwen3.6-35B-A3B": synth.FullSizeHubConfig(),
	} {
		if _, err := checkpoint.ParseConfig(raw, name+"/config.json"); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestNewCommitFetchesOnlyWhatChanged: after the repository moves on, a
// pull of main fetches the changed file only, links the rest from the
// blobs already there, and moves refs/main; the old snapshot stays.
func TestNewCommitFetchesOnlyWhatChanged(t *testing.T) {
	h, old := newHub(t)
	c := newClient(t, h)
	if _, err := c.Pull(context.Background(), testRepo, PullOptions{}); err != nil {
		t.Fatal(err)
	}
	files := fixtureFiles(t)
	files["generation_config.json"] = []byte(strings.Replace(string(files["generation_config.json"]), `"top_p": 0.95`, `"top_p": 0.9`, 1))
	repo := h.Add(testRepo, files)
	h.ResetCounts()
	s, err := c.Pull(context.Background(), testRepo, PullOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Commit != repo.Commit || s.Commit == old.Commit {
		t.Fatalf("commit %s, want the new %s", s.Commit, repo.Commit)
	}
	if n := h.FileRequests(); n != 1 || h.Resolves("generation_config.json") != 1 {
		t.Errorf("%d file requests, want 1 (generation_config.json)", n)
	}
	if s.Fetched != int64(len(files["generation_config.json"])) {
		t.Errorf("fetched %d bytes, want only the changed file's", s.Fetched)
	}
	if commit, _ := c.Cache().ResolveRevision(testRepo, "main"); commit != repo.Commit {
		t.Errorf("refs/main = %s, want %s", commit, repo.Commit)
	}
	if err := Validate(c.Cache().SnapshotDir(testRepo, old.Commit)); err != nil {
		t.Errorf("the old snapshot broke: %v", err)
	}
}
