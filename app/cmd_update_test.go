package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// check-update reads the feed it is given and says what it found; a feed
// that is not a release is an error naming the feed.
func TestCheckUpdateCommand(t *testing.T) {
	for _, tc := range []struct {
		name, body, want string
		fails            bool
	}{
		{"newer", `{"tag_name":"v999.0.0","html_url":"https://example.invalid/r"}`, "Suzuran 999.0.0 is available (you have " + version + ")", false},
		{"same", `{"tag_name":"v` + version + `","html_url":"https://example.invalid/r"}`, "Suzuran " + version + " is up to date.", false},
		{"malformed", `not json`, "did not send a release as JSON", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				fmt.Fprint(w, tc.body)
			}))
			defer srv.Close()
			out, stderr, err := execute(t, "check-update", "--feed", srv.URL)
			if (err != nil) != tc.fails {
				t.Fatalf("error %v, want failure %v\n%s%s", err, tc.fails, out, stderr)
			}
			if !strings.Contains(out+stderr, tc.want) {
				t.Errorf("output %q does not say %q", out+stderr, tc.want)
			}
		})
	}
}
