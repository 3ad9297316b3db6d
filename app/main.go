// Command suzuran is the Suzuran menu-bar app and its command line.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCmd().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "suzuran:", err)
		os.Exit(1)
	}
}

func runGUI() error { return fmt.Errorf("the desktop app is not built yet") }
