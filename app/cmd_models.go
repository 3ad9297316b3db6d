package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/hub"
	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/app/settings"
	"github.com/suzuran-app/suzuran/assets/models"
)

func newModelsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "models",
		Short: "List the models on this computer and which one Suzuran uses",
		Long: `models lists the model folders found in the Hugging Face cache (where
"suzuran pull", mlx-lm and "hf download" put them) and in LM Studio's models
folders (~/.lmstudio/models, ~/.cache/lm-studio/models), each checked the way
the engine loads it: its name, size, folder, whether it is ready or why not,
and a * before the one Suzuran uses.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return listModels(cmd.OutOrStdout())
		},
	}
	cmd.AddCommand(&cobra.Command{
		Use:   "use NAME|DIR",
		Short: "Make a model the one Suzuran uses: a name from `suzuran models`, or a folder",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return useModel(cmd.OutOrStdout(), args[0])
		},
	})
	return cmd
}

// discoverModels lists the models in the default places.
func discoverModels() ([]hub.Found, error) {
	cfg, err := hub.ConfigFromEnv()
	if err != nil {
		return nil, err
	}
	return hub.Discover(hub.DefaultPlaces(cfg))
}

func listModels(w io.Writer) error {
	found, err := discoverModels()
	if err != nil {
		return err
	}
	configured, err := configuredModel()
	if err != nil {
		return err
	}
	if configured != "" && !containsDir(found, configured) {
		f := hub.Inspect(configured)
		f.Source = "settings"
		found = append(found, f)
	}
	if root, err := models.DefaultRoot(); err == nil {
		found = append(found, hub.Found{Name: models.DemoName + " (demo)", Dir: filepath.Join(root, models.FolderName()), Source: "built in"})
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSIZE\tWHERE\tSTATUS")
	for _, f := range found {
		mark := " "
		if sameDir(f.Dir, configured) || (configured == "" && f.Source == "built in") {
			mark = "*"
		}
		size, status := bytesize.Format(f.Size), "ready"
		if f.Source == "built in" {
			if _, err := os.Stat(f.Dir); err != nil {
				size, status = "8 MB", "ready (installed on first use)"
			} else {
				size = bytesize.Format(folderSize(f.Dir))
			}
		}
		if !f.Valid() {
			status = oneLine(f.Err.Error())
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%s\n", mark, f.Name, size, f.Source+": "+tildePath(f.Dir), status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(found) == 1 {
		fmt.Fprintf(w, "\nNo downloaded model found. `suzuran pull` downloads %s.\n", hub.DefaultRepo)
	}
	return nil
}

func useModel(w io.Writer, arg string) error {
	var chosen hub.Found
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		chosen = hub.Inspect(arg)
	} else {
		found, err := discoverModels()
		if err != nil {
			return err
		}
		var matches []hub.Found
		for _, f := range found {
			if strings.EqualFold(f.Name, arg) || strings.EqualFold(filepath.Base(f.Name), arg) {
				matches = append(matches, f)
			}
		}
		switch {
		case len(matches) == 0:
			return fmt.Errorf("no model named %q was found (see `suzuran models`); give its folder instead, or download it with `suzuran pull %s`", arg, arg)
		case len(matches) > 1:
			valid := matches[:0:0]
			for _, m := range matches {
				if m.Valid() {
					valid = append(valid, m)
				}
			}
			if len(valid) != 1 {
				var dirs []string
				for _, m := range matches {
					dirs = append(dirs, m.Dir)
				}
				return fmt.Errorf("%q names %d models; give the folder of the one to use:\n  %s", arg, len(matches), strings.Join(dirs, "\n  "))
			}
			matches = valid
		}
		chosen = matches[0]
	}
	path, err := settings.Path()
	if err != nil {
		return err
	}
	if _, err := hub.UseModel(path, chosen.Dir); err != nil {
		return err
	}
	fmt.Fprintf(w, "Suzuran now uses %s (%s)\n", chosen.Name, chosen.Dir)
	return nil
}

func containsDir(found []hub.Found, dir string) bool {
	for _, f := range found {
		if sameDir(f.Dir, dir) {
			return true
		}
	}
	return false
}

// sameDir reports whether two paths name the same folder.
func sameDir(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	sa, errA := os.Stat(a)
	sb, errB := os.Stat(b)
	return errA == nil && errB == nil && os.SameFile(sa, sb)
}

// tildePath writes a path under the home folder as ~/..., as a shell user
// would type it.
func tildePath(p string) string {
	home, err := os.UserHomeDir()
	if err != nil || home == "" {
		return p
	}
	if rel, ok := strings.CutPrefix(p, home+string(filepath.Separator)); ok {
		return "~/" + rel
	}
	return p
}

// folderSize is the total size of the files in a folder.
func folderSize(dir string) int64 {
	var n int64
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
	}
	return n
}

// oneLine keeps the first line of an error for the table.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
