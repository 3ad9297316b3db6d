package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"github.com/suzuran-app/suzuran/app/hub"
	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/app/settings"
)

func newPullCmd() *cobra.Command {
	var (
		revision string
		force    bool
	)
	cmd := &cobra.Command{
		Use:   "pull [REPO] [--revision R]",
		Short: "Download a model from the Hugging Face hub (default " + hub.DefaultRepo + ")",
		Long: `pull downloads a model of Qwen3.6-35B-A3B's architecture from the Hugging
Face hub into the Hugging Face cache, where mlx-lm and "hf download" find it
too, and a copy they made is used without downloading it again. It checks
first that this machine can run the model and the disk can hold it, and
refuses a repository of another model before fetching its weights.

Stop it with Ctrl-C and run it again: it goes on where it stopped. Every file
is checked against its SHA-256 before it is used.

When no model is configured yet, the downloaded one becomes the model every
command and the app use ("suzuran models use" changes it).

The environment of huggingface_hub applies: HF_TOKEN (or the token file of
"hf auth login") for gated and private models, HF_HOME and HF_HUB_CACHE for
the cache, HF_ENDPOINT for a mirror, HF_HUB_OFFLINE=1 to use only the cache.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			repo := hub.DefaultRepo
			if len(args) == 1 {
				repo = args[0]
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return runPull(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), repo, revision, force)
		},
	}
	cmd.Flags().StringVar(&revision, "revision", "main", "branch, tag or commit to download")
	cmd.Flags().BoolVar(&force, "force", false, "download even when the machine check says this computer cannot run the model (to copy it elsewhere)")
	return cmd
}

func runPull(ctx context.Context, stdout, stderr io.Writer, repo, revision string, force bool) error {
	cfg, err := hub.ConfigFromEnv()
	if err != nil {
		return err
	}
	client := hub.NewClient(cfg)
	plan, err := client.Plan(ctx, repo, revision)
	if err != nil {
		return err
	}
	switch {
	case plan.Offline != "":
		fmt.Fprintf(stderr, "%s\n%s@%s (%s) is already in %s; using that copy\n", plan.Offline, repo, plan.Revision, bytesize.Format(plan.Size), tildePath(plan.Dir))
	case plan.Cached:
		fmt.Fprintf(stderr, "%s@%s (%s) is already in %s\n", repo, plan.Revision, bytesize.Format(plan.Size), tildePath(plan.Dir))
	default:
		fmt.Fprintf(stderr, "%s@%s: %s, %s to download into %s\n", repo, plan.Revision, bytesize.Format(plan.Size), bytesize.Format(plan.ToDownload), tildePath(cfg.CacheDir))
	}
	for _, f := range plan.Machine.Findings {
		if f.Level == hub.Fine && plan.Cached {
			continue
		}
		fmt.Fprintf(stderr, "  %-7s %s\n", f.Level.String()+":", f.Message)
	}
	if !plan.Machine.CanRun() {
		diskOnly := true
		for _, f := range plan.Machine.Findings {
			if f.Level == hub.Refusal && f.Check != "disk" {
				diskOnly = false
			}
		}
		switch {
		case diskOnly:
			return errors.New("not enough free disk space for the download (see above)")
		case !force:
			return errors.New("this computer cannot run the model (see above); --force downloads it anyway, for example to copy it to another Mac")
		}
	}
	snapshotDir := plan.Dir
	if plan.Listing != nil {
		bar := newPullProgress(stderr)
		snap, err := client.Download(ctx, plan.Listing, bar.update)
		bar.end()
		if errors.Is(err, context.Canceled) {
			return fmt.Errorf("stopped; run suzuran pull %s again to go on where it stopped", repo)
		}
		if err != nil {
			return err
		}
		snapshotDir = snap.Dir
		if snap.Fetched > 0 {
			fmt.Fprintf(stderr, "downloaded %s in %s, every file checked against its SHA-256\n", bytesize.Format(snap.Fetched), bar.elapsed().Round(time.Second))
		}
	}
	fmt.Fprintln(stdout, snapshotDir)
	configured, err := configuredModel()
	if err != nil {
		return err
	}
	switch configured {
	case "":
		path, err := settings.Path()
		if err != nil {
			return err
		}
		if err := settings.SetModel(path, snapshotDir); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%s is now the model Suzuran uses (saved in %s)\n", repo, path)
	case snapshotDir:
	default:
		fmt.Fprintf(stderr, "to use it instead of %s: suzuran models use %s\n", configured, repo)
	}
	return nil
}

// pullProgress shows a download's progress: a bar redrawn in place on a
// terminal, a line at every tenth of the way otherwise (a log, a pipe).
// The numbers (speed over the last seconds, time left) are hub.Progress's,
// which tells resumed and cached bytes from those fetched now.
type pullProgress struct {
	w        io.Writer
	terminal bool
	width    int
	start    time.Time
	lastStep int  // tenths reported, for plain lines
	drawn    bool // a bar is on the current line
}

func newPullProgress(w io.Writer) *pullProgress {
	p := &pullProgress{w: w, terminal: isTerminal(w), width: 80, start: time.Now(), lastStep: -1}
	if f, ok := w.(*os.File); ok && p.terminal {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			p.width = int(ws.Col)
		}
	}
	return p
}

func (p *pullProgress) elapsed() time.Duration { return time.Since(p.start) }

// update is the hub.Progress callback.
func (p *pullProgress) update(pr hub.Progress) {
	pct := int(pr.Fraction() * 100)
	stats := fmt.Sprintf("%3d%% %s / %s", pct, bytesize.Format(pr.Done), bytesize.Format(pr.Total))
	if pr.BytesPerSecond > 0 && !pr.Finished {
		stats += fmt.Sprintf("  %s/s", bytesize.Format(int64(pr.BytesPerSecond)))
	}
	if pr.Remaining > 0 && !pr.Finished {
		stats += "  " + formatLeft(pr.Remaining)
	}
	if !p.terminal {
		step := pct / 10
		if step > p.lastStep || pr.Finished {
			p.lastStep = step
			fmt.Fprintf(p.w, "%s: %s, %d of %d files\n", pr.Repo, stats, pr.FilesDone, pr.FilesTotal)
		}
		return
	}
	barWidth := max(p.width-len(stats)-3, 10)
	filled := int(pr.Fraction() * float64(barWidth))
	bar := "[" + strings.Repeat("=", filled) + strings.Repeat(" ", barWidth-filled) + "] " + stats
	// \r and erase-line redraw the bar in place.
	fmt.Fprintf(p.w, "\r\x1b[K%s", bar)
	p.drawn = true
}

// end finishes the bar's line.
func (p *pullProgress) end() {
	if p.drawn {
		fmt.Fprintln(p.w)
		p.drawn = false
	}
}

// formatLeft writes a time left as "3m20s left" or "1h05m left".
func formatLeft(d time.Duration) string {
	d = d.Round(time.Second)
	switch {
	case d >= time.Hour:
		return fmt.Sprintf("%dh%02dm left", int(d.Hours()), int(d.Minutes())%60)
	case d >= time.Minute:
		return fmt.Sprintf("%dm%02ds left", int(d.Minutes()), int(d.Seconds())%60)
	}
	return fmt.Sprintf("%ds left", int(d.Seconds()))
}
