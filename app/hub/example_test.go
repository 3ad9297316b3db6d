package hub_test

import (
	"context"
	"fmt"
	"log"

	"github.com/suzuran-app/suzuran/app/hub"
	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/app/settings"
)

// The welcome view's flow: what would be downloaded and whether this
// machine can run it, then the download in the background with progress,
// then the model saved as the configured one. (Not run: it needs the hub.)
func Example_welcome() {
	cfg, err := hub.ConfigFromEnv()
	if err != nil {
		log.Fatal(err)
	}
	client := hub.NewClient(cfg)

	// Models already on this machine: offer them before any download.
	found, _ := hub.Discover(hub.DefaultPlaces(cfg))
	for _, f := range found {
		fmt.Println(f.Name, f.Source, f.Valid())
	}

	plan, err := client.Plan(context.Background(), hub.DefaultRepo, "")
	if err != nil {
		log.Fatal(err) // *hub.Error: its message is for the user
	}
	fmt.Println(bytesize.Format(plan.ToDownload), "into", plan.Dir)
	for _, f := range plan.Machine.Findings {
		fmt.Println(f.Level, f.Message)
	}
	if !plan.Machine.CanRun() {
		return
	}

	downloads := &hub.Downloads{Client: client}
	job, err := downloads.Start(plan.Repo, plan.Revision)
	if err != nil {
		log.Fatal(err)
	}
	reports, stop := job.Watch()
	defer stop()
	for p := range reports { // closed when the download ends
		fmt.Printf("%.0f%% %s/s\n", 100*p.Fraction(), bytesize.Format(int64(p.BytesPerSecond)))
	}
	snap, err := job.Wait()
	if err != nil {
		log.Fatal(err)
	}
	if err := settings.SetModel("/path/to/settings.json", snap.Dir); err != nil {
		log.Fatal(err)
	}
}
