package hub

import (
	"context"
	"fmt"
	"sync"
)

// Downloads runs the app's downloads in the background, one at a time, so
// that the welcome view, the tray and the service all see the same one:
// Start begins (or resumes) a download, Current is the one running or last
// run, and each Job can be watched, cancelled (which pauses it: the next
// Start of the same repository goes on from there) and waited for.
type Downloads struct {
	Client *Client

	mu  sync.Mutex
	job *Job
}

// Start downloads a revision of repo in the background. While a download
// of the same repository and revision runs, Start returns it; while another
// runs, it returns an error naming it.
func (d *Downloads) Start(repo, revision string) (*Job, error) {
	if revision == "" {
		revision = "main"
	}
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if j := d.job; j != nil && !j.finished() {
		if j.Repo == repo && j.Revision == revision {
			return j, nil
		}
		return nil, fmt.Errorf("%s is downloading; pause it before starting %s", j.Repo, repo)
	}
	ctx, cancel := context.WithCancel(context.Background())
	j := &Job{Repo: repo, Revision: revision, cancel: cancel, done: make(chan struct{})}
	j.last = Progress{Repo: repo, Remaining: -1}
	d.job = j
	go j.run(ctx, d.Client)
	return j, nil
}

// Current is the download running now or the last one, nil before any.
func (d *Downloads) Current() *Job {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.job
}

// Job is one background download.
type Job struct {
	Repo     string
	Revision string

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	last     Progress
	watchers []chan Progress
	ended    bool // the watchers are closed; no new ones
	snapshot *Snapshot
	err      error
}

func (j *Job) run(ctx context.Context, c *Client) {
	snap, err := c.Pull(ctx, j.Repo, PullOptions{Revision: j.Revision, Progress: j.publish})
	j.mu.Lock()
	j.snapshot, j.err, j.ended = snap, err, true
	for _, w := range j.watchers {
		close(w)
	}
	j.watchers = nil
	j.mu.Unlock()
	j.cancel()
	close(j.done)
}

// publish records a progress report and hands it to the watchers; a
// watcher that has not taken the previous report gets this one instead, so
// a slow watcher never holds the download up.
func (j *Job) publish(p Progress) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.last = p
	for _, w := range j.watchers {
		select {
		case <-w:
		default:
		}
		w <- p
	}
}

// Progress is the latest report (for a tray that polls).
func (j *Job) Progress() Progress {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.last
}

// Watch returns a channel of progress reports, starting with the latest,
// closed when the download ends; stop stops the reports early.
func (j *Job) Watch() (reports <-chan Progress, stop func()) {
	w := make(chan Progress, 1)
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.ended {
		w <- j.last
		close(w)
		return w, func() {}
	}
	w <- j.last
	j.watchers = append(j.watchers, w)
	return w, func() {
		j.mu.Lock()
		defer j.mu.Unlock()
		for i, x := range j.watchers {
			if x == w {
				j.watchers = append(j.watchers[:i], j.watchers[i+1:]...)
				close(w)
				return
			}
		}
	}
}

// Cancel pauses the download: the files and partial files stay, and the
// next Start of the same repository resumes. Wait then returns
// context.Canceled.
func (j *Job) Cancel() { j.cancel() }

// Done is closed when the download has ended, by success, error or Cancel.
func (j *Job) Done() <-chan struct{} { return j.done }

// Wait waits for the end and returns the snapshot or the error.
func (j *Job) Wait() (*Snapshot, error) {
	<-j.done
	return j.snapshot, j.err
}

// finished reports whether the job has ended.
func (j *Job) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}
