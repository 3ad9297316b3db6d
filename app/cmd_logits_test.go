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
// float64 reference, with each precision: exact within 1e-4 of the largest
// logit (the f32 bound of the engine's fixture tests; it lands at 1.4e-5
// here), fast within 5e-3 (its bar; it lands near 1e-3).
func TestLogitsCommand(t *testing.T) {
	for _, c := range []struct {
		precision string
		tolerance float64
	}{{"exact", 1e-4}, {"fast", 5e-3}} {
		t.Run(c.precision, func(t *testing.T) { testLogitsCommand(t, c.precision, c.tolerance) })
	}
}

func testLogitsCommand(t *testing.T, precision string, tolerance float64) {
	alt := filepath.Join("..", "engine", "checkpoint", "testdata", "qwen35moe-alt")
	ref := openTensors(t, filepath.Join(alt, "reference.safetensors"))
	promptT, _ := ref.Tensor("prompt_ids")
	ids := promptFlag(promptT)
	out := filepath.Join(t.TempDir(), "out.safetensors")
	cmd := newLogitsCmd()
	var stdout bytes.Buffer
	cmd.SetOut(&stdout)
	cmd.SetArgs([]string{"--model", filepath.Join(alt, "mlx-4bit"), "--ids", ids, "--gen", "3", "--out", out, "--precision", precision})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	f := openTensors(t, out)
	T := promptT.NumElements()
	for name, shape := range map[string][]int{"prompt_logits": {T, 512}, "gen_ids": {3}, "gen_logits": {3, 512}} {
		tn, ok := f.Tensor(name)
		if !ok || len(tn.Shape) != len(shape) || tn.Shape[0] != shape[0] {
			t.Fatalf("%s: %v, want shape %v", name, tn.Shape, shape)
		}
	}
	got, _ := f.Tensor("prompt_logits")
	want, _ := ref.Tensor("mlx.prompt_logits")
	if e := relError(got, want); !(e <= tolerance) {
		t.Fatalf("prompt_logits: relative error %.3g > %g", e, tolerance)
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

// TestLogitsCommandErrors checks that bad input fails with a message that
// names what to fix.
func TestLogitsCommandErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "/nonexistent", "--ids", "1,2", "--out", "x"}, "/nonexistent"},
		{[]string{"--model", ".", "--ids", "1,a", "--out", "x"}, `--ids: "a" is not a token id`},
		{[]string{"--model", ".", "--ids", "1", "--backend", "nope", "--out", "x"}, `unknown backend "nope": choose one of cpu, emu`},
		{[]string{"--model", ".", "--ids", "1"}, `"out" not set`},
		{[]string{"--model", ".", "--ids", "1", "--precision", "half", "--out", "x"}, `--precision: precision "half": choose fast`},
		{[]string{"--model", ".", "--ids", "1", "--backend", "emu", "--precision", "exact", "--out", "x"}, `only the cpu backend has a choice of precision`},
	} {
		cmd := newLogitsCmd()
		cmd.SetArgs(c.args)
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("suzuran logits %v: error %v, want one containing %q", c.args, err, c.want)
		}
	}
}

// promptFlag turns a reference file's I32 prompt_ids into --ids' value.
func promptFlag(ids safetensors.Tensor) string {
	var s []string
	for i := range ids.NumElements() {
		s = append(s, strconv.Itoa(int(int32(binary.LittleEndian.Uint32(ids.Data[4*i:])))))
	}
	return strings.Join(s, ",")
}

// relError is max|got-want| / max|want| over two float tensors: +Inf when
// their sizes differ or one does not convert, NaN when got holds a NaN.
func relError(got, want safetensors.Tensor) float64 {
	g, err1 := safetensors.ToFloat32(got)
	w, err2 := safetensors.ToFloat32(want)
	if err1 != nil || err2 != nil || len(g) != len(w) {
		return math.Inf(1)
	}
	var d, m float64
	for i := range w {
		d = max(d, math.Abs(float64(g[i])-float64(w[i])))
		m = max(m, math.Abs(float64(w[i])))
	}
	return d / m
}

// openTensors opens a safetensors file for the test, closed when it ends.
func openTensors(t *testing.T, path string) *safetensors.File {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// tensorOf returns f's tensor name; a missing one fails the test.
func tensorOf(t *testing.T, f *safetensors.File, name string) safetensors.Tensor {
	t.Helper()
	tn, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	return tn
}
