package hub

import (
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
)

// Progress is a download's state, reported while Pull runs.
type Progress struct {
	Repo string `json:"repo"`
	// Done is how many bytes are in place or in partial files (resumed and
	// cached bytes included); Total is the size of every file.
	Done  int64 `json:"done"`
	Total int64 `json:"total"`
	// FilesDone of FilesTotal files are complete.
	FilesDone  int `json:"filesDone"`
	FilesTotal int `json:"filesTotal"`
	// Current is a file being downloaded now.
	Current string `json:"current"`
	// BytesPerSecond is the speed over the last few seconds.
	BytesPerSecond float64 `json:"bytesPerSecond"`
	// Remaining is the time left at that speed; negative when unknown.
	// In JSON it is whole seconds (-1 unknown).
	Remaining time.Duration `json:"-"`
	// Finished is set on the last report, once the snapshot is complete.
	Finished bool `json:"finished"`
}

// MarshalJSON adds remainingSeconds, the time left in whole seconds.
func (p Progress) MarshalJSON() ([]byte, error) {
	type plain Progress
	secs := int64(-1)
	if p.Remaining >= 0 {
		secs = int64(p.Remaining.Round(time.Second) / time.Second)
	}
	return json.Marshal(struct {
		plain
		RemainingSeconds int64 `json:"remainingSeconds"`
	}{plain(p), secs})
}

// String is a line for the tray: "Downloading mlx-community/Qwen3.6-35B-A3B-4bit:
// 45% (9.18 GB of 20.4 GB), 12 min left".
func (p Progress) String() string {
	if p.Finished {
		return fmt.Sprintf("Downloaded %s (%s)", p.Repo, bytesize.Format(p.Total))
	}
	s := fmt.Sprintf("Downloading %s: %d%% (%s of %s)", p.Repo, int(p.Fraction()*100), bytesize.Format(p.Done), bytesize.Format(p.Total))
	switch {
	case p.Remaining < 0:
	case p.Remaining < time.Minute:
		s += ", less than a minute left"
	case p.Remaining < 2*time.Hour:
		s += fmt.Sprintf(", %d min left", int(p.Remaining.Round(time.Minute)/time.Minute))
	default:
		s += fmt.Sprintf(", %d h left", int(p.Remaining.Round(time.Hour)/time.Hour))
	}
	return s
}

// Fraction is the share done, from 0 to 1.
func (p Progress) Fraction() float64 {
	if p.Total == 0 {
		return 1
	}
	return float64(p.Done) / float64(p.Total)
}

// speedWindow is how far back the speed is measured: long enough to smooth
// the bursts of a few parallel connections, short enough to follow a
// change of network.
const speedWindow = 5 * time.Second

// tracker counts a download's bytes from its workers and reports them.
type tracker struct {
	repo       string
	total      int64
	filesTotal int
	report     func(Progress)

	done      atomic.Int64 // bytes present
	fetched   atomic.Int64 // bytes downloaded by this run
	filesDone atomic.Int64
	current   atomic.Value // string

	mu      sync.Mutex // serialises report and guards samples
	samples []sample
	ticker  *time.Ticker
	quit    chan struct{}
	stopped sync.WaitGroup
}

type sample struct {
	at      time.Time
	fetched int64
}

func newTracker(l *Listing, report func(Progress), every time.Duration) *tracker {
	t := &tracker{repo: l.Repo, total: l.Size(), filesTotal: len(l.Files), report: report, quit: make(chan struct{})}
	t.current.Store("")
	if report == nil {
		return t
	}
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	t.ticker = time.NewTicker(every)
	t.stopped.Add(1)
	go func() {
		defer t.stopped.Done()
		for {
			select {
			case <-t.quit:
				return
			case <-t.ticker.C:
				t.send(false)
			}
		}
	}()
	return t
}

func (t *tracker) cached(f File) {
	t.done.Add(f.Size)
	t.filesDone.Add(1)
}
func (t *tracker) resumed(n int64)      { t.done.Add(n) }
func (t *tracker) discard(n int64)      { t.done.Add(-n) }
func (t *tracker) fileDone()            { t.filesDone.Add(1) }
func (t *tracker) setCurrent(p string)  { t.current.Store(p) }
func (t *tracker) fetchedBytes(n int64) { t.done.Add(n); t.fetched.Add(n) }

// send reports the current state.
func (t *tracker) send(finished bool) {
	if t.report == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := time.Now()
	fetched := t.fetched.Load()
	t.samples = append(t.samples, sample{now, fetched})
	for len(t.samples) > 2 && now.Sub(t.samples[1].at) >= speedWindow {
		t.samples = t.samples[1:]
	}
	p := Progress{
		Repo: t.repo, Done: t.done.Load(), Total: t.total,
		FilesDone: int(t.filesDone.Load()), FilesTotal: t.filesTotal,
		Current: t.current.Load().(string), Remaining: -1, Finished: finished,
	}
	if first := t.samples[0]; now.Sub(first.at) > 0 {
		p.BytesPerSecond = float64(fetched-first.fetched) / now.Sub(first.at).Seconds()
	}
	if finished {
		p.Done, p.FilesDone, p.Current, p.Remaining = p.Total, p.FilesTotal, "", 0
	} else if p.BytesPerSecond > 0 {
		p.Remaining = time.Duration(float64(p.Total-p.Done) / p.BytesPerSecond * float64(time.Second))
	}
	t.report(p)
}

// stop ends the periodic reports.
func (t *tracker) stop() {
	if t.ticker == nil {
		return
	}
	select {
	case <-t.quit:
	default:
		close(t.quit)
		t.ticker.Stop()
		t.stopped.Wait()
	}
}

// finish stops the periodic reports and sends the last one.
func (t *tracker) finish() {
	t.stop()
	t.send(true)
}
