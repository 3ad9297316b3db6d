package main

import (
	"fmt"
	"io"

	"github.com/rs/zerolog"
	"github.com/spf13/cobra"
)

// subcommands builds the suzuran command line's subcommands, each defined
// in its cmd_*.go file. A new command is added here.
func subcommands() []*cobra.Command {
	return []*cobra.Command{
		newBenchCmd(),
		newChatCmd(),
		newCheckUpdateCmd(),
		newDoctorCmd(),
		newExtractCmd(),
		newLogitsCmd(),
		newModelsCmd(),
		newPullCmd(),
		newRenderCmd(),
		newServeCmd(),
		newTokenizeCmd(),
		newVersionCmd(),
	}
}

// newRootCmd builds the suzuran command: with no subcommand it starts the
// menu-bar app.
func newRootCmd() *cobra.Command {
	var level string
	var logFile io.Closer = nopCloser{}
	root := &cobra.Command{
		Use:           "suzuran",
		Short:         "Suzuran runs Qwen3.6-35B-A3B locally, from the menu bar or the terminal",
		Version:       version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGUI()
		},
	}
	// Every command logs through zerolog's global logger; the desktop app
	// (the root command itself) also writes the rotating log file, since
	// launched from Finder it has no terminal.
	root.PersistentPreRunE = func(cmd *cobra.Command, args []string) error {
		lvl, err := zerolog.ParseLevel(level)
		if err != nil || lvl == zerolog.NoLevel {
			return fmt.Errorf("--log-level %q: use one of trace, debug, info, warn, error", level)
		}
		_, closer, err := setupLogging(logOptions{level: lvl, toFile: cmd == root})
		if err != nil {
			return err
		}
		logFile = closer
		return nil
	}
	root.PersistentPostRunE = func(cmd *cobra.Command, args []string) error {
		return logFile.Close()
	}
	root.PersistentFlags().StringVar(&level, "log-level", "info", "least severe log level to record: trace, debug, info, warn or error")
	root.SetVersionTemplate("suzuran {{.Version}}\n")
	root.SetHelpCommand(newHelpCmd())
	root.AddCommand(subcommands()...)
	return root
}
