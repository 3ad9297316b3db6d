package hub

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

// BenchmarkFetchLFSFile measures one LFS file through the resolve redirect
// over loopback into a fresh cache: the client's own cost (copy, SHA-256,
// write, fsync, rename), which bounds how fast a real network can be
// followed. Run: go test -run '^$' -bench FetchLFSFile ./app/hub
func BenchmarkFetchLFSFile(b *testing.B) {
	const size = 256 << 20
	data := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	h := fakehub.New(b)
	repo := h.Add("bench/big", map[string][]byte{"model.safetensors": data})
	f := repo.Files["model.safetensors"]
	l := &Listing{Repo: "bench/big", Revision: "main", Commit: repo.Commit,
		Files: []File{{Path: "model.safetensors", Size: size, GitID: f.GitID, SHA256: f.SHA256}}}
	b.SetBytes(size)
	for b.Loop() {
		c := &Client{Config: Config{Endpoint: h.URL, CacheDir: b.TempDir()}}
		tr := newTracker(l, nil, 0)
		if err := c.fetchFile(context.Background(), l, l.Files[0], tr); err != nil {
			b.Fatal(err)
		}
	}
}
