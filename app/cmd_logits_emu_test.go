package main

import (
	"bytes"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestLogitsCommandEmu runs `suzuran logits --backend emu --stats` on the
// tiny fixture model's MLX layout: the GPU path on the host emulator must
// reproduce the reference's greedy continuation and its logits within 3e-3
// of the largest — the half-operand bound of the engine's fixture tests,
// since the prefill GEMMs take half operands (rounded to 11 significant
// bits; measured 1.1e-3 on this checkpoint, against 7e-6 with float
// operands) — and --stats must report
// the pipeline counters in words on stderr.
func TestLogitsCommandEmu(t *testing.T) {
	tiny := filepath.Join(repoFixtures(t), "qwen35moe-tiny")
	ref := openTensors(t, filepath.Join(tiny, "reference.safetensors"))
	promptT, _ := ref.Tensor("prompt_ids")
	ids := promptFlag(promptT)
	wantIDs, _ := ref.Tensor("mlx.gen_ids")
	gen := wantIDs.NumElements()
	out := filepath.Join(t.TempDir(), "out.safetensors")
	cmd := newLogitsCmd()
	var stdout, stderr bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	cmd.SetArgs([]string{"--model", filepath.Join(tiny, "mlx-4bit"), "--ids", ids,
		"--gen", strconv.Itoa(gen), "--backend", "emu", "--stats", "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	f := openTensors(t, out)
	gotIDs, _ := f.Tensor("gen_ids")
	if !bytes.Equal(gotIDs.Data, wantIDs.Data) {
		t.Fatal("gen_ids differ from the reference's greedy continuation")
	}
	for _, name := range []string{"prompt_logits", "gen_logits"} {
		got, _ := f.Tensor(name)
		want, _ := ref.Tensor("mlx." + name)
		e := relError(got, want)
		t.Logf("%s: relative error %.2e", name, e)
		if !(e <= 3e-3) {
			t.Fatalf("%s: relative error %.3g > 3e-3", name, e)
		}
	}
	for _, line := range []string{
		"decode: command buffers per token: 1\n",
		"decode: host waits per token: 1\n",
		"decode: mid-step readbacks per token: 0\n",
		"prefill: command buffers per chunk: 1\n",
		"decode: planned / minimum bytes: ",
	} {
		if !strings.Contains(stderr.String(), line) {
			t.Errorf("--stats output lacks %q:\n%s", line, stderr.String())
		}
	}
}
