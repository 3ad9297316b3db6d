package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// TestLogitsCommand runs `suzuran logits` on the alternative-size
// checkpoint's MLX layout with its 300-token reference prompt and checks
// the file it writes: shapes, the greedy ids and the logits against the
// float64 reference (1e-3 of the largest logit, the engine's bound; the CPU
// backend lands near 1e-5).
func TestLogitsCommand(t *testing.T) {
	alt := filepath.Join("..", "engine", "checkpoint", "testdata", "qwen35moe-alt")
	ref, err := safetensors.Open(filepath.Join(alt, "reference.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	promptT, _ := ref.Tensor("prompt_ids")
	var ids []string
	for i := range promptT.NumElements() {
		ids = append(ids, strconv.Itoa(int(int32(binary.LittleEndian.Uint32(promptT.Data[4*i:])))))
	}
	out := filepath.Join(t.TempDir(), "out.safetensors")
	cmd := newLogitsCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"--model", filepath.Join(alt, "mlx-4bit"), "--ids", strings.Join(ids, ","), "--gen", "3", "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	T := promptT.NumElements()
	for name, shape := range map[string][]int{"prompt_logits": {T, 512}, "gen_ids": {3}, "gen_logits": {3, 512}} {
		tn, ok := f.Tensor(name)
		if !ok || len(tn.Shape) != len(shape) || tn.Shape[0] != shape[0] {
			t.Fatalf("%s: %v, want shape %v", name, tn.Shape, shape)
		}
	}
	got, _ := f.Tensor("prompt_logits")
	want, _ := ref.Tensor("mlx.prompt_logits")
	g, _ := safetensors.ToFloat32(got)
	w, _ := safetensors.ToFloat32(want)
	var d, m float64
	for i := range w {
		d = max(d, math.Abs(float64(g[i]-w[i])))
		m = max(m, math.Abs(float64(w[i])))
	}
	if !(d/m <= 1e-3) {
		t.Fatalf("prompt_logits: relative error %.3g > 1e-3", d/m)
	}
	gotIDs, _ := f.Tensor("gen_ids")
	wantIDs, _ := ref.Tensor("mlx.gen_ids")
	if !bytes.Equal(gotIDs.Data, wantIDs.Data[:12]) {
		t.Fatal("gen_ids differ from the reference's first three")
	}
	if _, err := os.Stat(out); err != nil || !strings.Contains(stdout.String(), "3 generated") {
		t.Fatalf("command output %q", stdout.String())
	}
}

func TestLogitsCommandErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--model", "/nonexistent", "--ids", "1,2", "--out", "x"},
		{"--model", ".", "--ids", "1,a", "--out", "x"},
		{"--model", ".", "--ids", "1", "--backend", "nope", "--out", "x"},
		{"--ids", "1", "--out", "x"},
	} {
		cmd := newLogitsCmd()
		cmd.SetArgs(args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil {
			t.Errorf("suzuran logits %v succeeded", args)
		}
	}
}
