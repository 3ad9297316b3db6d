package update

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// releaseJSON is a release as GitHub's API sends it (trimmed to what
// matters, plus fields the checker must ignore).
func releaseJSON(tag string) string {
	return fmt.Sprintf(`{
  "url": "https://api.github.com/repos/suzuran-app/suzuran/releases/1",
  "html_url": "https://github.com/suzuran-app/suzuran/releases/tag/%[1]s",
  "id": 1,
  "tag_name": %[1]q,
  "name": "Suzuran %[1]s",
  "draft": false,
  "prerelease": false,
  "published_at": "2026-11-30T12:00:00Z",
  "assets": [
    {"name": "suzuran_%[2]s_arm64.deb", "browser_download_url": "https://github.com/suzuran-app/suzuran/releases/download/%[1]s/suzuran_%[2]s_arm64.deb"},
    {"name": "suzuran_%[2]s_amd64.deb", "browser_download_url": "https://github.com/suzuran-app/suzuran/releases/download/%[1]s/suzuran_%[2]s_amd64.deb"},
    {"name": "Suzuran-%[2]s.dmg", "browser_download_url": "https://github.com/suzuran-app/suzuran/releases/download/%[1]s/Suzuran-%[2]s.dmg"}
  ],
  "body": "What changed."
}`, tag, strings.TrimPrefix(tag, "v"))
}

// feed is a release feed served for the tests at /releases/latest: what it
// answers may change while it runs (set); each request is counted (hits)
// and signalled on asked. It checks that each asks for GitHub's JSON.
type feed struct {
	*httptest.Server
	hits  atomic.Int32
	asked chan struct{}

	mu     sync.Mutex
	status int
	body   string
}

func newFeed(t *testing.T, status int, body string) *feed {
	t.Helper()
	f := &feed{asked: make(chan struct{}, 1000), status: status, body: body}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.hits.Add(1)
		select {
		case f.asked <- struct{}{}:
		default:
		}
		if r.URL.Path != "/releases/latest" || r.Method != http.MethodGet {
			http.NotFound(w, r)
			return
		}
		if got := r.Header.Get("Accept"); got != "application/vnd.github+json" {
			t.Errorf("Accept header %q, want GitHub's JSON", got)
		}
		if got := r.Header.Get("User-Agent"); !strings.HasPrefix(got, "Suzuran/") {
			t.Errorf("User-Agent %q, want Suzuran/VERSION", got)
		}
		f.mu.Lock()
		status, body := f.status, f.body
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(f.Close)
	return f
}

// set changes what the feed answers.
func (f *feed) set(status int, body string) {
	f.mu.Lock()
	f.status, f.body = status, body
	f.mu.Unlock()
}

// waitHits waits up to 10 s until the feed has had n requests in all.
func (f *feed) waitHits(t *testing.T, n int32) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for f.hits.Load() < n {
		select {
		case <-f.asked:
		case <-timeout:
			t.Fatalf("the feed was asked %d times in 10 s, want at least %d", f.hits.Load(), n)
		}
	}
}

func TestCheck(t *testing.T) {
	const page = "https://github.com/suzuran-app/suzuran/releases/tag/"
	const download = "https://github.com/suzuran-app/suzuran/releases/download/"
	for _, tc := range []struct {
		name                   string
		current, tag           string
		goos, goarch           string
		wantNewer              bool
		wantLatest             string
		wantDownload, wantSays string
	}{
		{name: "newer, macOS gets the DMG", current: "0.1.0", tag: "v0.2.0", goos: "darwin", goarch: "arm64",
			wantNewer: true, wantLatest: "0.2.0", wantDownload: download + "v0.2.0/Suzuran-0.2.0.dmg",
			wantSays: "Suzuran 0.2.0 is available (you have 0.1.0). Download it from " + download + "v0.2.0/Suzuran-0.2.0.dmg"},
		{name: "newer, Linux amd64 gets its .deb", current: "0.1.0", tag: "v0.1.1", goos: "linux", goarch: "amd64",
			wantNewer: true, wantLatest: "0.1.1", wantDownload: download + "v0.1.1/suzuran_0.1.1_amd64.deb"},
		{name: "newer, Linux arm64 gets its .deb", current: "0.1.0", tag: "v1.0.0", goos: "linux", goarch: "arm64",
			wantNewer: true, wantLatest: "1.0.0", wantDownload: download + "v1.0.0/suzuran_1.0.0_arm64.deb"},
		{name: "newer, no download for this system: the release page", current: "0.1.0", tag: "v0.2.0", goos: "windows", goarch: "amd64",
			wantNewer: true, wantLatest: "0.2.0", wantDownload: page + "v0.2.0"},
		{name: "numeric, not text, order", current: "0.9.0", tag: "v0.10.0", goos: "darwin",
			wantNewer: true, wantLatest: "0.10.0", wantDownload: download + "v0.10.0/Suzuran-0.10.0.dmg"},
		{name: "a release is newer than its pre-release", current: "1.0.0-rc.1", tag: "v1.0.0", goos: "darwin",
			wantNewer: true, wantLatest: "1.0.0", wantDownload: download + "v1.0.0/Suzuran-1.0.0.dmg"},
		{name: "same", current: "0.1.0", tag: "v0.1.0", goos: "darwin",
			wantLatest: "0.1.0", wantDownload: download + "v0.1.0/Suzuran-0.1.0.dmg", wantSays: "Suzuran 0.1.0 is up to date."},
		{name: "same, tag without v", current: "v0.1.0", tag: "0.1.0", goos: "darwin",
			wantLatest: "0.1.0", wantDownload: download + "0.1.0/Suzuran-0.1.0.dmg", wantSays: "Suzuran 0.1.0 is up to date."},
		{name: "older release than the running build", current: "0.3.0", tag: "v0.2.9", goos: "darwin",
			wantLatest: "0.2.9", wantDownload: download + "v0.2.9/Suzuran-0.2.9.dmg",
			wantSays: "Suzuran 0.3.0 is newer than the latest release (0.2.9)."},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFeed(t, http.StatusOK, releaseJSON(tc.tag))
			c := Checker{Feed: srv.URL + "/releases/latest", Current: tc.current, GOOS: tc.goos, GOARCH: tc.goarch}
			got, err := c.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got.Newer != tc.wantNewer || got.Latest != tc.wantLatest || got.DownloadURL != tc.wantDownload {
				t.Errorf("got newer=%v latest=%q download=%q\nwant newer=%v latest=%q download=%q",
					got.Newer, got.Latest, got.DownloadURL, tc.wantNewer, tc.wantLatest, tc.wantDownload)
			}
			if got.ReleaseURL != page+tc.tag {
				t.Errorf("release page %q, want %q", got.ReleaseURL, page+tc.tag)
			}
			if want := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC); !got.Published.Equal(want) {
				t.Errorf("published %v, want %v", got.Published, want)
			}
			if tc.wantSays != "" && got.Message() != tc.wantSays {
				t.Errorf("message %q\nwant    %q", got.Message(), tc.wantSays)
			}
			if srv.hits.Load() != 1 {
				t.Errorf("%d requests to the feed, want 1", srv.hits.Load())
			}
		})
	}
}

// Every way the feed can fail gives an error that says what went wrong, and
// no Result that could be mistaken for "up to date" or "newer".
func TestCheckFailures(t *testing.T) {
	oversize := `{"tag_name":"v9.0.0","body":"` + strings.Repeat("x", maxFeedBytes) + `"}`
	for _, tc := range []struct {
		name    string
		status  int
		body    string
		current string
		want    string
	}{
		{"not JSON", http.StatusOK, `<html>rate limited</html>`, "0.1.0", "did not send a release as JSON"},
		{"truncated JSON", http.StatusOK, releaseJSON("v0.2.0")[:100], "0.1.0", "did not send a release as JSON"},
		{"JSON of the wrong shape", http.StatusOK, `[{"tag_name":"v0.2.0"}]`, "0.1.0", "did not send a release as JSON"},
		{"no tag", http.StatusOK, `{"html_url":"https://example.invalid/r"}`, "0.1.0", "has no tag_name"},
		{"tag that is not a version", http.StatusOK, releaseJSON("nightly"), "0.1.0", `tag "nightly" is not a version`},
		{"draft", http.StatusOK, strings.Replace(releaseJSON("v0.2.0"), `"draft": false`, `"draft": true`, 1), "0.1.0", "draft or pre-release"},
		{"pre-release", http.StatusOK, strings.Replace(releaseJSON("v0.2.0"), `"prerelease": false`, `"prerelease": true`, 1), "0.1.0", "draft or pre-release"},
		{"no page and no asset", http.StatusOK, `{"tag_name":"v0.2.0"}`, "0.1.0", "no https page address"},
		{"links that are not https", http.StatusOK, `{"tag_name":"v0.2.0","html_url":"file:///etc/passwd",
			"assets":[{"name":"Suzuran-0.2.0.dmg","browser_download_url":"javascript:alert(1)"}]}`, "0.1.0", "no https page address"},
		{"too large", http.StatusOK, oversize, "0.1.0", "more than 1048576 bytes"},
		{"no release yet", http.StatusNotFound, `{"message":"Not Found"}`, "0.1.0", "no release has been published yet"},
		{"rate limited", http.StatusForbidden, `{"message":"API rate limit exceeded"}`, "0.1.0", "try again in an hour"},
		{"server error", http.StatusBadGateway, ``, "0.1.0", "answered 502 Bad Gateway"},
		{"running version unstamped", http.StatusOK, releaseJSON("v0.2.0"), "dev", `running version "dev" is not a version`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newFeed(t, tc.status, tc.body)
			got, err := Checker{Feed: srv.URL + "/releases/latest", Current: tc.current, GOOS: "darwin"}.Check(context.Background())
			if err == nil {
				t.Fatalf("no error; result %+v", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if got != (Result{}) {
				t.Errorf("a failed check returned a result: %+v", got)
			}
		})
	}
}

// unreachableFeed is an address on which nothing listens: a port that was
// just open and is closed again.
func unreachableFeed(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/releases/latest"
}

func TestCheckUnreachable(t *testing.T) {
	_, err := Checker{Feed: unreachableFeed(t), Current: "0.1.0"}.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach") || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("error %v, want one saying the feed cannot be reached and what to do", err)
	}
	if !strings.Contains(err.Error(), "refused the connection") || strings.Contains(err.Error(), "dial tcp") || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("error %q: want why in words, without the transport's own text, and the cause kept", err)
	}
}

// A name that cannot be looked up says so in words, not with the
// transport's text (which names the resolver's address).
func TestCheckUnknownName(t *testing.T) {
	_, err := Checker{Feed: "https://releases.invalid/latest", Current: "0.1.0"}.Check(context.Background())
	if err == nil || !strings.Contains(err.Error(), "cannot reach releases.invalid: its name could not be looked up") {
		t.Fatalf("error %v, want the name lookup named in words", err)
	}
	for _, raw := range []string{"lookup", "dial", ":53", "no such host"} {
		if strings.Contains(err.Error(), raw) {
			t.Errorf("error %q carries the transport's text %q", err, raw)
		}
	}
}

// A feed that accepts the connection and never answers costs a check its
// Timeout and no more.
func TestCheckHangingFeedTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)

	const timeout = 200 * time.Millisecond
	start := time.Now()
	_, err := Checker{Feed: srv.URL + "/releases/latest", Current: "0.1.0", Timeout: timeout}.Check(context.Background())
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "did not answer in time") {
		t.Fatalf("error %v, want one saying the feed did not answer in time", err)
	}
	// The bound: the timeout plus generous scheduling slack for a loaded
	// two-core machine; a check that waited for the server would take until
	// the test ends.
	if took > timeout+2*time.Second {
		t.Errorf("the check took %v with a %v timeout", took, timeout)
	}
}

// waitSignals waits up to 10 s for n signals on ch, counted from now.
func waitSignals(t *testing.T, ch chan struct{}, n int, what string) {
	t.Helper()
	for len(ch) > 0 {
		<-ch
	}
	timeout := time.After(10 * time.Second)
	for range n {
		select {
		case <-ch:
		case <-timeout:
			t.Fatalf("fewer than %d %s in 10 s", n, what)
		}
	}
}

// Daily checks on its schedule while the switch is on, skips while it is
// off, announces a newer version once, and reports failures to OnError.
func TestDaily(t *testing.T) {
	f := newFeed(t, http.StatusOK, releaseJSON("v0.1.0"))
	set := func(tag string, status int) { f.set(status, releaseJSON(tag)) }
	hits := &f.hits

	var enabled atomic.Bool
	enabled.Store(true)
	notified := make(chan Result, 10)
	failed := make(chan error, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	c := Checker{
		Feed: f.URL + "/releases/latest", Current: "0.1.0", GOOS: "darwin",
		FirstCheck: time.Millisecond, Interval: 20 * time.Millisecond,
		OnError: func(err error) { failed <- err },
	}
	// skipped is told each time a due check finds the switch off.
	skipped := make(chan struct{}, 100)
	switchOn := func() bool {
		on := enabled.Load()
		if !on {
			select {
			case skipped <- struct{}{}:
			default:
			}
		}
		return on
	}
	go func() {
		c.Daily(ctx, switchOn, func(r Result) { notified <- r })
		close(done)
	}()
	waitSkips := func(n int) { t.Helper(); waitSignals(t, skipped, n, "checks that found the switch off") }

	// waitHits waits until the feed has been asked n more times.
	waitHits := func(n int32) { t.Helper(); f.waitHits(t, hits.Load()+n) }

	// Up to date: checks run, nobody is told.
	waitHits(2)
	if len(notified) != 0 {
		t.Fatalf("told about %+v while up to date", <-notified)
	}

	// Off: no checks at all (several intervals pass). A check under way
	// when the switch turns off ends before the next one finds it off.
	enabled.Store(false)
	waitSkips(1)
	before := hits.Load()
	waitSkips(5)
	if after := hits.Load(); after != before {
		t.Errorf("the feed was asked %d times while the switch was off", after-before)
	}

	// On again, with a newer release: told once, however many checks see it.
	set("v0.2.0", http.StatusOK)
	enabled.Store(true)
	waitHits(3)
	select {
	case r := <-notified:
		if r.Latest != "0.2.0" || !r.Newer {
			t.Errorf("told %+v, want the newer 0.2.0", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not told about 0.2.0")
	}
	if len(notified) != 0 {
		t.Errorf("told about 0.2.0 more than once: %+v", <-notified)
	}

	// A broken feed goes to OnError, not to the user.
	set("v0.2.0", http.StatusInternalServerError)
	waitHits(1)
	select {
	case err := <-failed:
		if !strings.Contains(err.Error(), "500") {
			t.Errorf("OnError got %v, want the 500", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a failing check did not reach OnError")
	}

	// A release newer again is told again.
	set("v0.3.0", http.StatusOK)
	select {
	case r := <-notified:
		if r.Latest != "0.3.0" {
			t.Errorf("told %+v, want 0.3.0", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("not told about 0.3.0")
	}

	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Daily did not return after its context ended")
	}
}

// Quitting the app while a daily check waits on a feed that never answers
// ends Daily at once, not after the check's timeout.
func TestDailyStopsDuringAHangingCheck(t *testing.T) {
	arrived := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		<-r.Context().Done()
	}))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var errs atomic.Int32
	c := Checker{Feed: srv.URL + "/releases/latest", Current: "0.1.0", Timeout: time.Hour,
		FirstCheck: time.Millisecond, OnError: func(error) { errs.Add(1) }}
	go func() {
		c.Daily(ctx, func() bool { return true }, func(Result) { t.Error("told about a release the feed never sent") })
		close(done)
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the first check never reached the feed")
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Daily kept waiting on the feed after its context ended")
	}
	if errs.Load() != 0 {
		t.Error("quitting was reported as a failed check")
	}
}

// Daily goes by the wall clock: a day asleep counts as a day. The fake
// clock below stands still while the real poll ticks (the Mac's monotonic
// clock, which stops during sleep), then jumps a day (the Mac wakes up).
func TestDailyFollowsTheWallClock(t *testing.T) {
	srv := newFeed(t, http.StatusOK, releaseJSON("v0.1.0"))
	hits := &srv.hits
	var mu sync.Mutex
	clock := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	// polled is told each time Daily reads the clock: once a poll.
	polled := make(chan struct{}, 100)
	waitPolls := func(n int) { t.Helper(); waitSignals(t, polled, n, "polls") }
	advance := func(d time.Duration) {
		mu.Lock()
		clock = clock.Add(d)
		mu.Unlock()
	}
	c := Checker{Feed: srv.URL + "/releases/latest", Current: "0.1.0",
		FirstCheck: time.Millisecond, Interval: 24 * time.Hour,
		poll: 2 * time.Millisecond,
		now: func() time.Time {
			select {
			case polled <- struct{}{}:
			default:
			}
			mu.Lock()
			defer mu.Unlock()
			return clock
		}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		c.Daily(ctx, func() bool { return true }, func(Result) {})
		close(done)
	}()
	defer func() { cancel(); <-done }()

	srv.waitHits(t, 1) // the first check, soon after the start
	// Many polls within the same wall-clock hour: no check.
	waitPolls(50)
	if got := hits.Load(); got != 1 {
		t.Fatalf("%d checks before a day had passed on the wall clock, want 1", got)
	}
	advance(23 * time.Hour)
	waitPolls(25)
	if got := hits.Load(); got != 1 {
		t.Fatalf("%d checks after 23 hours, want 1", got)
	}
	advance(time.Hour) // a day since the first check
	srv.waitHits(t, 2)
	waitPolls(25)
	if got := hits.Load(); got != 2 {
		t.Errorf("%d checks once a day had passed, want exactly 2", got)
	}
}

func TestCanonical(t *testing.T) {
	for in, want := range map[string]string{"0.1.0": "v0.1.0", "v0.1.0": "v0.1.0", " v1.2.3\n": "v1.2.3"} {
		if got := canonical(in); got != want {
			t.Errorf("canonical(%q) = %q, want %q", in, got, want)
		}
	}
}
