package main

import (
	"testing"

	"github.com/suzuran-app/suzuran/app/service"
)

func TestTrayDownloadLine(t *testing.T) {
	for _, c := range []struct {
		state service.DownloadState
		want  string
	}{
		{service.DownloadState{State: service.DownloadIdle}, ""},
		{service.DownloadState{State: service.DownloadRunning, Line: "Downloading a/b: 45% (9 MB of 20 MB), 1 min left"}, "Downloading a/b: 45% (9 MB of 20 MB), 1 min left"},
		{service.DownloadState{State: service.DownloadPaused, Line: "Download paused at 45%: a/b"}, "Download paused at 45%: a/b"},
		{service.DownloadState{State: service.DownloadFailed, Line: "Download failed: a/b", Error: "long text"}, "Download failed: open the window for what to do"},
	} {
		if got := downloadLine(c.state); got != c.want {
			t.Errorf("downloadLine(%+v) = %q, want %q", c.state, got, c.want)
		}
	}
}
