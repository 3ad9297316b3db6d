package main

import (
	"fmt"

	"github.com/spf13/cobra"
)

// version is Suzuran's version. The Makefile sets it from wails.json's
// info.productVersion with -ldflags "-X main.version=…"; this default is
// the same number (a test keeps them equal) for plain `go build` and
// `go run`.
var version = "0.1.0"

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print Suzuran's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "suzuran", version)
			return err
		},
	}
}
