// Package update tells the user when a newer Suzuran has been released.
//
// A Checker reads the project's GitHub releases feed (the JSON of
// /repos/{owner}/{repo}/releases/latest, which leaves out drafts and
// pre-releases), compares the release's tag with the running version, and
// answers with a Result: whether the release is newer, the release page, and
// the download that fits this computer (the .dmg on macOS, the .deb of this
// architecture on Linux). It never downloads or installs anything: the app
// shows the Result and the user decides whether to open the link.
//
// Checks never hold the app up. Each has a time limit (Checker.Timeout) on
// top of the caller's context, the feed's body is read up to a bound, and
// Daily runs in its own goroutine, asks before every check whether the user
// still wants it (the settings switch), and reports only a newer release, at
// most once per version.
package update

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"syscall"
	"time"

	"golang.org/x/mod/semver"
)

// Feed is the releases feed of the project (github.com/suzuran-app/suzuran,
// the module path). A variable so that tests and forks can point it
// elsewhere.
var Feed = "https://api.github.com/repos/suzuran-app/suzuran/releases/latest"

// DefaultTimeout bounds one check: connecting, the answer and its body.
const DefaultTimeout = 15 * time.Second

// Defaults of the daily check.
const (
	// DefaultFirstCheck is how long after launch the first daily check
	// runs, so that it never competes with the app starting up.
	DefaultFirstCheck = 2 * time.Minute
	// DefaultInterval is the time between checks.
	DefaultInterval = 24 * time.Hour
	// pollEvery is how often Daily looks at the wall clock to see whether
	// Interval has passed. Go's timers run on the monotonic clock, which
	// stops while a Mac sleeps, so a bare 24-hour timer on a laptop that
	// sleeps every night would fire days late.
	pollEvery = time.Hour
)

// maxFeedBytes bounds what is read of the feed. GitHub's answer for a
// release with a dozen assets and long notes is a few tens of kilobytes.
const maxFeedBytes = 1 << 20

// Checker checks the releases feed for a version newer than Current. Its zero
// value (with Current set) reads Feed with a client of its own.
type Checker struct {
	Feed    string       // URL of the releases/latest JSON; Feed when empty
	Current string       // the running version, as `suzuran version` prints it ("0.1.0")
	Client  *http.Client // nil: http.DefaultClient's transport, bounded by Timeout
	Timeout time.Duration

	// GOOS and GOARCH choose the download; runtime's values when empty.
	GOOS, GOARCH string

	// The daily check: the first DefaultFirstCheck after Daily starts, then
	// every DefaultInterval, unless these are set. OnError, when set, hears
	// each failed check (the app logs them; a user is not bothered).
	FirstCheck time.Duration
	Interval   time.Duration
	OnError    func(error)

	// Tests replace the wall clock and the polling period.
	now  func() time.Time
	poll time.Duration
}

// Result is what a check found.
type Result struct {
	Current     string    // the running version
	Latest      string    // the latest release's version, without a leading "v"
	Newer       bool      // Latest is newer than Current
	ReleaseURL  string    // the release's page on GitHub
	DownloadURL string    // the asset for this computer (.dmg, .deb); ReleaseURL when the release has none
	Published   time.Time // when the release was published; zero when the feed does not say
}

// Message is the sentence the app shows for r.
func (r Result) Message() string {
	if r.Newer {
		return fmt.Sprintf("Suzuran %s is available (you have %s). Download it from %s", r.Latest, r.Current, r.DownloadURL)
	}
	if semver.Compare(canonical(r.Latest), canonical(r.Current)) < 0 {
		return fmt.Sprintf("Suzuran %s is newer than the latest release (%s).", r.Current, r.Latest)
	}
	return fmt.Sprintf("Suzuran %s is up to date.", r.Current)
}

// release is the part of GitHub's release JSON a check reads.
type release struct {
	TagName     string    `json:"tag_name"`
	HTMLURL     string    `json:"html_url"`
	Draft       bool      `json:"draft"`
	Prerelease  bool      `json:"prerelease"`
	PublishedAt time.Time `json:"published_at"`
	Assets      []struct {
		Name               string `json:"name"`
		BrowserDownloadURL string `json:"browser_download_url"`
	} `json:"assets"`
}

// Check reads the feed once and compares its release with Current.
func (c Checker) Check(ctx context.Context) (Result, error) {
	current := canonical(c.Current)
	if !semver.IsValid(current) {
		return Result{}, fmt.Errorf("update check: the running version %q is not a version number like 1.2.3 (is the binary built with make, which stamps it from wails.json?)", c.Current)
	}
	feed := c.Feed
	if feed == "" {
		feed = Feed
	}
	timeout := c.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	rel, err := fetch(ctx, c.client(), feed, "Suzuran/"+strings.TrimPrefix(current, "v"))
	if err != nil {
		return Result{}, err
	}
	latest := canonical(rel.TagName)
	if !semver.IsValid(latest) {
		return Result{}, fmt.Errorf("update check: %s: the latest release's tag %q is not a version like v1.2.3; nothing to compare, try again later", feed, rel.TagName)
	}
	if rel.Draft || rel.Prerelease {
		// releases/latest never answers with these; a feed that does is
		// not one to offer to users.
		return Result{}, fmt.Errorf("update check: %s: the latest release %s is a draft or pre-release; ignoring it", feed, rel.TagName)
	}
	result := Result{
		Current:    strings.TrimPrefix(current, "v"),
		Latest:     strings.TrimPrefix(latest, "v"),
		Newer:      semver.Compare(latest, current) > 0,
		ReleaseURL: webLink(rel.HTMLURL),
		Published:  rel.PublishedAt,
	}
	result.DownloadURL = result.ReleaseURL
	if suffix := c.assetSuffix(); suffix != "" {
		for _, a := range rel.Assets {
			if strings.HasSuffix(a.Name, suffix) && webLink(a.BrowserDownloadURL) != "" {
				result.DownloadURL = a.BrowserDownloadURL
				break
			}
		}
	}
	if result.DownloadURL == "" {
		return Result{}, fmt.Errorf("update check: %s: release %s has no https page address (html_url) and no download for this computer", feed, rel.TagName)
	}
	return result, nil
}

// webLink is link if it is an https address, which the app may open in the
// browser, and "" otherwise: a feed's links are shown to the user and
// opened on a click, so nothing else (file:, javascript:, a bare path) is.
func webLink(link string) string {
	u, err := url.Parse(link)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return ""
	}
	return link
}

func (c Checker) client() *http.Client {
	if c.Client != nil {
		return c.Client
	}
	return &http.Client{}
}

// assetSuffix is how the name of this computer's download ends: the DMG on
// macOS, the .deb of this architecture on Linux (Debian's names for the Go
// architectures the package is built for).
func (c Checker) assetSuffix() string {
	goos, goarch := c.GOOS, c.GOARCH
	if goos == "" {
		goos = runtime.GOOS
	}
	if goarch == "" {
		goarch = runtime.GOARCH
	}
	switch goos {
	case "darwin":
		return ".dmg"
	case "linux":
		if arch, ok := map[string]string{"amd64": "amd64", "arm64": "arm64"}[goarch]; ok {
			return "_" + arch + ".deb"
		}
	}
	return ""
}

func fetch(ctx context.Context, client *http.Client, feed, userAgent string) (release, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, feed, nil)
	if err != nil {
		return release{}, fmt.Errorf("update check: feed address %q: %w", feed, err)
	}
	// GitHub's REST API asks for these, and refuses requests without a
	// User-Agent; naming the app and version lets the project's maintainers
	// be told apart from other callers.
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return release{}, fmt.Errorf("update check: %s did not answer in time; check the internet connection and try again", feed)
		}
		return release{}, &reachError{host: req.URL.Host, why: unreachableWhy(err), err: err}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return release{}, fmt.Errorf("update check: %s: no release has been published yet", feed)
	case resp.StatusCode == http.StatusForbidden || resp.StatusCode == http.StatusTooManyRequests:
		return release{}, fmt.Errorf("update check: %s answered %s (GitHub limits how often an address may ask); try again in an hour", feed, resp.Status)
	case resp.StatusCode != http.StatusOK:
		return release{}, fmt.Errorf("update check: %s answered %s; try again later", feed, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxFeedBytes+1))
	if err != nil {
		return release{}, fmt.Errorf("update check: reading %s: %w", feed, err)
	}
	if len(body) > maxFeedBytes {
		return release{}, fmt.Errorf("update check: %s sent more than %d bytes, which is not a release; is the feed address right?", feed, maxFeedBytes)
	}
	var rel release
	if err := json.Unmarshal(body, &rel); err != nil {
		return release{}, fmt.Errorf("update check: %s did not send a release as JSON (%v); is the feed address right?", feed, err)
	}
	if rel.TagName == "" {
		return release{}, fmt.Errorf("update check: %s: the release has no tag_name; is the feed address right?", feed)
	}
	return rel, nil
}

// canonical turns "0.1.0", "v0.1.0" and " v0.1.0\n" into semver's "v0.1.0".
func canonical(version string) string {
	v := strings.TrimSpace(version)
	if !strings.HasPrefix(v, "v") {
		v = "v" + v
	}
	return v
}

// Daily checks on a schedule until ctx ends: first FirstCheck after it
// starts, then whenever Interval has passed on the wall clock since the last
// check (time asleep counts). Before each check it asks enabled (the
// settings switch, read afresh each time, so turning it off or on needs no
// restart) and skips the check when it says no; switched back on after a
// day or more, it checks within the hour. It calls notify for a newer
// release, once per version however many checks see it; failures go to
// OnError. Run it in a goroutine of its own:
//
//	go checker.Daily(ctx, settingsSaysCheck, showUpdate)
func (c Checker) Daily(ctx context.Context, enabled func() bool, notify func(Result)) {
	first, every := c.FirstCheck, c.Interval
	if first <= 0 {
		first = DefaultFirstCheck
	}
	if every <= 0 {
		every = DefaultInterval
	}
	poll := c.poll
	if poll <= 0 {
		poll = min(every, pollEvery)
	}
	now := c.now
	if now == nil {
		// Round(0) drops the monotonic reading, so that differences are
		// taken on the wall clock.
		now = func() time.Time { return time.Now().Round(0) }
	}
	timer := time.NewTimer(first)
	defer timer.Stop()
	var announced string
	var last time.Time // wall-clock time of the last check; zero before the first
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		timer.Reset(poll)
		if !last.IsZero() && now().Sub(last) < every {
			continue
		}
		if !enabled() {
			continue
		}
		last = now()
		result, err := c.Check(ctx)
		switch {
		case err != nil:
			if c.OnError != nil && ctx.Err() == nil {
				c.OnError(err)
			}
		case result.Newer && result.Latest != announced:
			announced = result.Latest
			notify(result)
		}
	}
}

// reachError is a feed that could not be reached. Its message says why in
// words, without the transport's own text (which names the resolver's
// address and the dial steps); the cause stays for errors.Is.
type reachError struct {
	host, why string
	err       error
}

func (e *reachError) Error() string {
	return fmt.Sprintf("update check: cannot reach %s: %s; check the internet connection and try again", e.host, e.why)
}

func (e *reachError) Unwrap() error { return e.err }

// unreachableWhy names the reason a connection failed, for people.
func unreachableWhy(err error) string {
	var dns *net.DNSError
	var op *net.OpError
	switch {
	case errors.As(err, &dns):
		return "its name could not be looked up (no internet connection, or the network's name service is not answering)"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "it refused the connection"
	case errors.Is(err, syscall.ENETUNREACH), errors.Is(err, syscall.EHOSTUNREACH):
		return "there is no route to it (no network connection)"
	case errors.As(err, &op) && op.Timeout():
		return "it did not answer in time"
	case strings.Contains(err.Error(), "certificate"):
		return "its security certificate could not be checked (the system clock may be wrong, or a network filter is in the way)"
	}
	return "the connection failed"
}
