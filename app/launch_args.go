package main

import "strings"

// launchArgs is the command line without the process serial number that
// macOS's Launch Services may pass an app it opens from Finder ("-psn_0_NNNN",
// seen after the Gatekeeper prompt of a downloaded app's first launch).
// Cobra would read it as the flags -p -s -n and refuse it, and the app would
// exit before its window opened; it carries nothing the app uses.
func launchArgs(args []string) []string {
	out := make([]string, 0, len(args))
	for _, a := range args {
		if strings.HasPrefix(a, "-psn_") {
			continue
		}
		out = append(out, a)
	}
	return out
}
