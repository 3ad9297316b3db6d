// Command suzuran is the Suzuran menu-bar app and its command line.
//
// With no arguments it starts the desktop app: a Wails window for the chat
// (gui.go) and a tray icon (tray.go). Subcommands, one file each
// (cmd_<name>.go), are listed in cli.go's subcommands; they keep their
// logic thin and call into engine/ packages where the work is done.
package main

import (
	"fmt"
	"os"
)

func main() {
	root := newRootCmd()
	root.SetArgs(launchArgs(os.Args[1:]))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "suzuran:", err)
		os.Exit(1)
	}
}
