package main

import (
	"runtime"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
)

// Flag values that make no sense are errors naming the flag, never quietly
// replaced: each case runs the real command line in a fresh process.
func TestBadFlagValuesAreRefused(t *testing.T) {
	tiny := repoFixtures(t) + "/qwen35moe-tiny/mlx-4bit"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"help", "nonsense"}, `unknown help topic "nonsense"`},
		{[]string{"chat", "--threads", "-4"}, "--threads -4: give a positive number"},
		{[]string{"chat", "--threads", "100000"}, "--threads 100000: this machine has"},
		{[]string{"chat", "--max-tokens", "999999999999"}, "--max-tokens 999999999999: the context holds"},
		{[]string{"logits", "--model", tiny, "--ids", "1,,3", "--out", "/dev/null"}, `--ids "1,,3": an empty entry`},
		{[]string{"logits", "--model", tiny, "--ids", "1,2", "--threads", "-1", "--out", "/dev/null"}, "--threads -1"},
		{[]string{"bench", "--model", tiny, "--runs", "0"}, "--runs 0: must be at least 1"},
		{[]string{"bench", "--model", tiny, "--gen", "-2"}, "--gen -2: must be at least 1"},
		{[]string{"bench", "--model", tiny, "--prompt", "16,0"}, "--prompt 0: must be at least 1"},
		{[]string{"bench", "--model", tiny, "--layer-costs", "some"}, `--layer-costs "some": choose blocks, prefixes or off`},
		{[]string{"bench", "--model", tiny, "--threads", "-4"}, "--threads -4"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, stderr, err := execute(t, tc.args...)
			if err == nil {
				t.Fatalf("exited 0; stderr:\n%s", stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr lacks %q:\n%s", tc.want, stderr)
			}
		})
	}
}

// `help chat` is the chat command's help, listing the backends this build
// has: no metal where it cannot run.
func TestHelpNamesThisBuildsBackends(t *testing.T) {
	out, stderr, err := execute(t, "help", "chat")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(out, "suzuran chat [--model DIR] [--backend "+strings.Join(engine.Backends(), "|")+"]") {
		t.Errorf("usage line lacks this build's backends %v:\n%s", engine.Backends(), out)
	}
	if runtime.GOOS != "darwin" && strings.Contains(out, "metal") {
		t.Errorf("help chat mentions metal on %s:\n%s", runtime.GOOS, out)
	}
	out, _, err = execute(t, "help")
	if err != nil || !strings.Contains(out, "Available Commands:") {
		t.Errorf("help: %v\n%s", err, out)
	}
}

// With --layer-costs off the table has no per-layer or projection
// headings with nothing under them.
func TestBenchLayerCostsOff(t *testing.T) {
	tiny := repoFixtures(t) + "/qwen35moe-tiny/mlx-4bit"
	out, stderr, err := execute(t, "bench", "--model", tiny, "--prompt", "8", "--gen", "2", "--runs", "1",
		"--warmup", "4", "--copy-mib", "4", "--layer-costs", "off")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if strings.Contains(out, "Per layer") || strings.Contains(out, "Projected") {
		t.Errorf("table shows layer sections with layer costs off:\n%s", out)
	}
	if !strings.Contains(out, "prefill 8: tok/s") {
		t.Errorf("table lacks the measurements:\n%s", out)
	}
}

func TestCountsAndProgressLines(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{statsLine(&engine.Stats{PrefilledTokens: 1, GeneratedTokens: 1, FinishReason: "length"}), "[prefill 1 token at 0.0 tok/s · decode 1 token · length]"},
		{plural(2, "token"), "2 tokens"},
		{plural(0, "token"), "0 tokens"},
		{thousands(18012), "18,012"},
		{thousands(999), "999"},
		{thousands(1234567), "1,234,567"},
		{thousands(-4000), "-4,000"},
		{prefillLine(engine.PrefillProgress{Cached: 12, Done: 12 + 7205, Total: 12 + 18012}), "Reading 18,012 tokens… 40 %"},
		{prefillLine(engine.PrefillProgress{Done: 0, Total: 600}), "Reading 600 tokens… 0 %"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
