package main

import (
	"github.com/spf13/cobra"
)

// commands holds the subcommands that files of this package register in
// their init functions with register.
var commands []*cobra.Command

// register adds a subcommand to the suzuran command line.
func register(c *cobra.Command) { commands = append(commands, c) }

// newRootCmd builds the suzuran command: with no subcommand it starts the
// menu-bar app.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "suzuran",
		Short:         "Suzuran runs Qwen3.6-35B-A3B locally, from the menu bar or the terminal",
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runGUI()
		},
	}
	root.AddCommand(commands...)
	return root
}
