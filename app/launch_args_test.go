package main

import (
	"slices"
	"strings"
	"testing"
)

func TestLaunchArgs(t *testing.T) {
	for _, tc := range []struct {
		args, want []string
	}{
		{nil, []string{}},
		// What Launch Services passes after the Gatekeeper prompt.
		{[]string{"-psn_0_1234567"}, []string{}},
		{[]string{"-psn_0_42", "--log-level", "debug"}, []string{"--log-level", "debug"}},
		{[]string{"version", "-psn_0_42"}, []string{"version"}},
		// Only the process serial number's own form is dropped.
		{[]string{"-p", "-psn", "--psn_0_1", "chat"}, []string{"-p", "-psn", "--psn_0_1", "chat"}},
	} {
		if got := launchArgs(tc.args); !slices.Equal(got, tc.want) || got == nil {
			t.Errorf("launchArgs(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}

// TestProcessSerialNumberArgument runs the real binary as Finder launches
// it the first time, with a -psn_ argument: the command line still parses.
func TestProcessSerialNumberArgument(t *testing.T) {
	want := "suzuran " + wailsVersion(t) + "\n"
	for _, args := range [][]string{{"-psn_0_4242", "version"}, {"-psn_0_4242", "--version"}} {
		out, stderr, err := execute(t, args...)
		if err != nil || out != want {
			t.Errorf("suzuran %s: %v, printed %q %q; want %q", strings.Join(args, " "), err, out, stderr, want)
		}
	}
}
