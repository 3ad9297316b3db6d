package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"github.com/suzuran-app/suzuran/app/update"
)

// newCheckUpdateCmd is `suzuran check-update`: the tray's "Check for
// Updates…" from the terminal. It only reports; nothing is downloaded.
func newCheckUpdateCmd() *cobra.Command {
	var feed string
	cmd := &cobra.Command{
		Use:   "check-update",
		Short: "Say whether a newer Suzuran has been released, and where to download it",
		Long: "check-update reads the project's GitHub releases feed and compares the latest\n" +
			"release with this version (" + version + "). It downloads and installs nothing.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			result, err := update.Checker{Feed: feed, Current: version}.Check(cmd.Context())
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), result.Message())
			return err
		},
	}
	cmd.Flags().StringVar(&feed, "feed", update.Feed, "the releases feed (GitHub's releases/latest JSON) to read")
	return cmd
}
