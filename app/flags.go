package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/backends"
)

// Checks of flag values that several commands share. A value that makes no
// sense is an error naming the flag and what to give instead, never quietly
// replaced by a default.

// maxThreadsPerCore bounds --threads: more threads than this many per core
// only add scheduling overhead to passes that are split evenly across them.
const maxThreadsPerCore = 4

// checkThreads validates --threads: 0 for every core, or a positive count.
func checkThreads(n int) error {
	if n < 0 {
		return fmt.Errorf("--threads %d: give a positive number of threads, or 0 to use every core", n)
	}
	if limit := maxThreadsPerCore * runtime.NumCPU(); n > limit {
		return fmt.Errorf("--threads %d: this machine has %d cores; give at most %d, or 0 to use every core", n, runtime.NumCPU(), limit)
	}
	return nil
}

// checkPositive validates a count flag that must be at least 1.
func checkPositive(flag string, n int) error {
	if n < 1 {
		return fmt.Errorf("--%s %d: must be at least 1", flag, n)
	}
	return nil
}

// checkMaxTokens validates --max-tokens against the context the engine
// holds: 0 means as many as fit.
func checkMaxTokens(n, context int) error {
	if n < 0 {
		return fmt.Errorf("--max-tokens %d: must be positive (or 0 for as many as the context holds)", n)
	}
	if n > context {
		return fmt.Errorf("--max-tokens %d: the context holds %d tokens, prompt and answer together; give at most that, or 0 for as many as fit", n, context)
	}
	return nil
}

// plural is "1 token", "2 tokens", "18,012 tokens".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return thousands(n) + " " + noun + "s"
}

// backendChoices is the --backend choices of this build, "cpu|emu" on Linux
// and "cpu|emu|metal" on macOS, for usage lines and errors.
func backendChoices() string { return strings.Join(engine.Backends(), "|") }

// checkBackend validates --backend against the backends this build has.
func checkBackend(name string) error {
	if !slices.Contains(engine.Backends(), name) {
		if err := backends.Unavailable(name); err != nil {
			return fmt.Errorf("backend %q cannot run here: %w", name, err)
		}
		return fmt.Errorf("unknown backend %q: this build has %s", name, strings.Join(engine.Backends(), ", "))
	}
	return nil
}

// newHelpCmd replaces cobra's help command, which answers an unknown topic
// with the main help and exit status 0: here it is an error naming the
// topic, so that a typo in a script fails.
func newHelpCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(c *cobra.Command, args []string) error {
			root := c.Root()
			target, rest, err := root.Find(args)
			if err != nil || len(rest) > 0 {
				return fmt.Errorf("unknown help topic %q: run 'suzuran help' for the list of commands", strings.Join(args, " "))
			}
			return target.Help()
		},
	}
}
