package hub

import (
	"context"
	"errors"
)

// Plan is what a download of a repository would do, for the welcome view
// and `suzuran pull` to show before it starts.
type Plan struct {
	Repo     string `json:"repo"`
	Revision string `json:"revision"`
	Commit   string `json:"commit"`
	// Dir is the snapshot folder the model will be in.
	Dir string `json:"dir"`
	// Size is the size of the model's files; ModelBytes of its weights.
	Size       int64 `json:"size"`
	ModelBytes int64 `json:"modelBytes"`
	// ToDownload is what is neither cached nor partly downloaded.
	ToDownload int64 `json:"toDownload"`
	// Cached is true when a complete copy is on disk already.
	Cached bool `json:"cached"`
	// Machine is the machine check against this model.
	Machine Report `json:"machineCheck"`
	// Offline says why the hub was not asked or did not answer, when the
	// plan comes from the cache ("" when the hub answered).
	Offline string `json:"offline,omitempty"`
	// Listing is the hub's listing; nil when the plan comes from the cache
	// (offline).
	Listing *Listing `json:"-"`
}

// Plan lists a revision (offline: finds it in the cache) and checks the
// machine against it. Pass the plan's Listing to Download to start.
func (c *Client) Plan(ctx context.Context, repo, revision string) (*Plan, error) {
	if revision == "" {
		revision = "main"
	}
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	if err := CheckRevision(revision); err != nil {
		return nil, err
	}
	var l *Listing
	var err error
	if !c.Offline {
		l, err = c.List(ctx, repo, revision)
	}
	if c.Offline || errors.Is(err, ErrNetwork) || errors.Is(err, ErrServer) {
		s, cerr := c.cachedSnapshot(repo, revision, err)
		if cerr != nil {
			return nil, cerr
		}
		p := &Plan{Repo: repo, Revision: revision, Commit: s.Commit, Dir: s.Dir, Size: s.Size, ModelBytes: weightBytes(s.Dir), Cached: true, Offline: "offline: HF_HUB_OFFLINE is set"}
		if err != nil {
			p.Offline = err.Error()
		}
		p.Machine = CheckMachine(Need{ModelBytes: p.ModelBytes, DiskMargin: c.diskMargin()}, c.CacheDir)
		return p, nil
	}
	if err != nil {
		return nil, err
	}
	remaining, err := c.remaining(l)
	if err != nil {
		return nil, err
	}
	cache := c.Cache()
	p := &Plan{Repo: repo, Revision: revision, Commit: l.Commit, Dir: cache.SnapshotDir(repo, l.Commit),
		Size: l.Size(), ModelBytes: l.WeightBytes(), ToDownload: remaining, Listing: l}
	p.Cached = remaining == 0 && Validate(p.Dir) == nil
	p.Machine = CheckMachine(Need{ModelBytes: p.ModelBytes, DownloadBytes: remaining, DiskMargin: c.diskMargin()}, c.CacheDir)
	return p, nil
}

// weightBytes is the size of a folder's safetensors files.
func weightBytes(dir string) int64 {
	var n int64
	for _, f := range globSafetensors(dir) {
		n += f
	}
	return n
}
