package update_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/suzuran-app/suzuran/app/update"
)

// The tray's "Check for Updates…": one check, its answer shown to the user.
func ExampleChecker_Check() {
	// A stand-in for api.github.com; the app leaves Feed empty.
	feed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"tag_name": "v0.2.0",
			"html_url": "https://github.com/suzuran-app/suzuran/releases/tag/v0.2.0",
			"assets": [{"name": "Suzuran-0.2.0.dmg",
				"browser_download_url": "https://github.com/suzuran-app/suzuran/releases/download/v0.2.0/Suzuran-0.2.0.dmg"}]}`)
	}))
	defer feed.Close()

	checker := update.Checker{Feed: feed.URL, Current: "0.1.0", GOOS: "darwin"}
	result, err := checker.Check(context.Background())
	if err != nil {
		fmt.Println(err) // show it: the user asked
		return
	}
	fmt.Println(result.Newer)
	fmt.Println(result.Message())
	// Output:
	// true
	// Suzuran 0.2.0 is available (you have 0.1.0). Download it from https://github.com/suzuran-app/suzuran/releases/download/v0.2.0/Suzuran-0.2.0.dmg
}

// The daily check, started with the app and ended when it quits; the switch
// in Settings is read before every check.
func ExampleChecker_Daily() {
	ctx, quit := context.WithCancel(context.Background())
	defer quit()
	settingsSaysCheck := func() bool { return true } // the Settings switch
	checker := update.Checker{
		Current: "0.1.0", // main.version
		OnError: func(err error) { /* log it; the user is not bothered */ },
	}
	go checker.Daily(ctx, settingsSaysCheck, func(r update.Result) {
		// Offer r.DownloadURL: a menu item or a notification that opens it
		// in the browser when clicked. Nothing is downloaded until then.
		fmt.Println(r.Message())
	})
}
