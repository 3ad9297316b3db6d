package main

import (
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/bench"
	"github.com/suzuran-app/suzuran/engine/cpu"
)

func TestBenchCommandErrors(t *testing.T) {
	tiny := filepath.Join(repoFixtures(t), "qwen35moe-tiny", "mlx-4bit")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--model", tiny, "--synthetic"}, "give either --model DIR or --synthetic, not both"},
		{[]string{"bench", "--table"}, "--table needs the report files"},
		{[]string{"bench", "--synthetic", "--layout", "gguf"}, `--layout "gguf"`},
		{[]string{"bench", "--model", tiny, "--backend", "abacus"}, `unknown backend "abacus"`},
		{[]string{"bench", "--table", filepath.Join(tiny, "config.json")}, "not a bench report"},
		{[]string{"bench", "--model", tiny, "--precision", "half"}, `--precision: precision "half"`},
		{[]string{"bench", "--model", tiny, "--isa", "sse9"}, `instruction set "sse9": this CPU runs`},
		{[]string{"bench", "--model", tiny, "--backend", "emu", "--precision", "exact"}, "only the cpu backend has a choice of precision"},
	} {
		_, stderr, err := execute(t, tc.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr, tc.want) {
			t.Errorf("suzuran %s: %v, stderr %q; want exit status 1 and an error containing %q",
				strings.Join(tc.args, " "), err, stderr, tc.want)
		}
	}
}

func TestBenchListBackends(t *testing.T) {
	out, stderr, err := execute(t, "bench", "--list-backends")
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	kinds := strings.Fields(out)
	if len(kinds) == 0 || kinds[0] != "cpu" || !strings.Contains(out, "emu") {
		t.Errorf("--list-backends printed %q, want cpu and emu (one a line)", out)
	}
}

// TestBenchRunAndTable runs a short benchmark on the tiny fixture, reads the
// JSON it prints and the file it writes, and prints the saved report as a
// table.
func TestBenchRunAndTable(t *testing.T) {
	tiny := filepath.Join(repoFixtures(t), "qwen35moe-tiny", "mlx-4bit")
	file := filepath.Join(t.TempDir(), "cpu.json")
	out, stderr, err := execute(t, "bench", "--model", tiny, "--prompt", "8,20", "--gen", "2", "--runs", "2",
		"--warmup", "4", "--copy-mib", "4", "--json", "--out", file)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var r bench.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("--json output is not a report: %v\n%s", err, out)
	}
	if r.Kind != "cpu" || len(r.Prefill) != 2 || r.Prefill[1].Tokens != 20 || r.Prefill[1].TTFT.N != 2 ||
		r.Decode[0].Tokens != 2 || r.Settings.Chunk != 512 || r.Model.Dir != tiny {
		t.Errorf("report: kind %q, prefill %+v, decode %+v, settings %+v, model %+v", r.Kind, r.Prefill, r.Decode, r.Settings, r.Model)
	}
	if k := r.Kernels; k == nil || k.ISA != cpu.ISAs()[0] || k.Precision != cpu.PrecisionFast {
		t.Errorf("report kernels %+v: want the best instruction set (%s) and the fast precision", k, cpu.ISAs()[0])
	}
	if !strings.Contains(stderr, "8-token prompt, run 2/2") {
		t.Errorf("progress on stderr lacks the runs:\n%s", stderr)
	}
	table, stderr, err := execute(t, "bench", "--table", file, file)
	if err != nil {
		t.Fatalf("--table: %v\n%s", err, stderr)
	}
	for _, want := range []string{"prefill 20: tok/s", "decode after 8: tok/s", "Projected to 40 layers"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}
