package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/safetensors"
)

var vlFixture = filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-vl-tiny")

// TestLogitsCommandImages runs `suzuran logits` with two images whose
// pixels come from the reference (--pixel-values) on the vision fixture's
// MLX layout, exact path: the prompt logits (the rows the fixture keeps),
// the greedy logits and the image embeddings within 1e-4 of transformers'
// (engine/cpu's TestVisionFixtures bar), the positions equal, and the
// images written back as the engine took them, in prompt order.
func TestLogitsCommandImages(t *testing.T) {
	refPath := filepath.Join(vlFixture, "reference.safetensors")
	ref := openTensors(t, refPath)
	promptT := tensorOf(t, ref, "mlx.two_images.prompt_ids")
	pixels := pixelValuesFile(t, ref, "image2", "image0")
	out := filepath.Join(t.TempDir(), "out.safetensors")
	cmd := newLogitsCmd()
	cmd.SetOut(&bytes.Buffer{})
	imgs := filepath.Join(vlFixture, "images")
	cmd.SetArgs([]string{"--model", filepath.Join(vlFixture, "mlx-4bit"), "--ids", promptFlag(promptT), "--gen", "8",
		"--image", filepath.Join(imgs, "image2.png"), "--image", filepath.Join(imgs, "image0.png"),
		"--pixel-values", pixels, "--out", out, "--precision", "exact"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	f := openTensors(t, out)

	// prompt_logits: the fixture keeps every row but the pads.
	rows := tensorOf(t, ref, "mlx.two_images.prompt_logit_rows")
	all, _ := safetensors.ToFloat32(tensorOf(t, f, "prompt_logits"))
	want, _ := safetensors.ToFloat32(tensorOf(t, ref, "mlx.two_images.prompt_logits"))
	V := 1024
	var kept []float32
	for i := range rows.NumElements() {
		r := int(int32(binary.LittleEndian.Uint32(rows.Data[4*i:])))
		kept = append(kept, all[r*V:(r+1)*V]...)
	}
	for _, c := range []struct {
		what      string
		got, want []float32
	}{
		{"prompt logits", kept, want},
		{"gen logits", floats(t, tensorOf(t, f, "gen_logits")), floats(t, tensorOf(t, ref, "mlx.two_images.gen_logits"))},
		{"image embeddings", floats(t, tensorOf(t, f, "image_embeds")), floats(t, tensorOf(t, ref, "mlx.two_images.image_embeds"))},
	} {
		if e := rel(c.got, c.want); !(e <= 1e-4) {
			t.Errorf("%s: relative error %.3g > 1e-4", c.what, e)
		}
	}
	if got, want := tensorOf(t, f, "position_ids"), tensorOf(t, ref, "mlx.two_images.position_ids"); !bytes.Equal(got.Data, want.Data) || !slices.Equal(got.Shape, want.Shape) {
		t.Error("position_ids differ from the reference's")
	}
	px := openTensors(t, pixels)
	for k, name := range []string{"image2", "image0"} {
		for _, part := range []string{"pixel_values", "grid_thw"} {
			got := tensorOf(t, f, "image"+string(rune('0'+k))+"."+part)
			if !bytes.Equal(got.Data, tensorOf(t, px, name+"."+part).Data) {
				t.Errorf("image%d.%s is not %s.%s", k, part, name, part)
			}
		}
	}
}

// TestLogitsCommandImagesProcessed runs `suzuran logits` on the two-image
// case of the hub layout with the fixture's PNG files read by the
// project's image processor (no --pixel-values): the grids equal the
// reference's, the pixels the engine took are within two uint8 steps
// (2/127.5) of the reference's, and the prompt and greedy logits within
// 2e-2 of transformers' (relative to the largest logit: the bar for
// processed pixels, which may differ from the reference's by a step of
// rounding where the resize filter lands on a half).
func TestLogitsCommandImagesProcessed(t *testing.T) {
	ref := openTensors(t, filepath.Join(vlFixture, "reference.safetensors"))
	out := filepath.Join(t.TempDir(), "out.safetensors")
	cmd := newLogitsCmd()
	cmd.SetOut(&bytes.Buffer{})
	imgs := filepath.Join(vlFixture, "images")
	cmd.SetArgs([]string{"--model", filepath.Join(vlFixture, "hf-bf16"), "--ids", promptFlag(tensorOf(t, ref, "hf.two_images.prompt_ids")), "--gen", "8",
		"--image", filepath.Join(imgs, "image2.png"), "--image", filepath.Join(imgs, "image0.png"), "--out", out})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	f := openTensors(t, out)
	for k, name := range []string{"image2", "image0"} {
		pre := "image" + string(rune('0'+k))
		if got, want := tensorOf(t, f, pre+".grid_thw"), tensorOf(t, ref, name+".grid_thw"); !bytes.Equal(got.Data, want.Data) {
			t.Errorf("%s.grid_thw %v, want %s's", pre, got.Data, name)
		}
		px := floats(t, tensorOf(t, f, pre+".pixel_values"))
		codes := tensorOf(t, ref, name+".pixel_codes").Data
		if len(px) != len(codes) {
			t.Fatalf("%s: %d pixel values, want %d", pre, len(px), len(codes))
		}
		var worst float64
		for i, u := range codes {
			worst = max(worst, math.Abs(float64(px[i])-(float64(u)-127.5)/127.5))
		}
		if worst > 2/127.5+1e-6 {
			t.Errorf("%s: pixel values differ from %s's by up to %.4g, over two uint8 steps (%.4g)", pre, name, worst, 2/127.5)
		}
		t.Logf("%s (%s): largest pixel difference %.3g", pre, name, worst)
	}
	rows := tensorOf(t, ref, "hf.two_images.prompt_logit_rows")
	all := floats(t, tensorOf(t, f, "prompt_logits"))
	V := 1024
	var kept []float32
	for i := range rows.NumElements() {
		r := int(int32(binary.LittleEndian.Uint32(rows.Data[4*i:])))
		kept = append(kept, all[r*V:(r+1)*V]...)
	}
	for _, c := range []struct {
		what      string
		got, want []float32
	}{
		{"prompt logits", kept, floats(t, tensorOf(t, ref, "hf.two_images.prompt_logits"))},
		{"gen logits", floats(t, tensorOf(t, f, "gen_logits")), floats(t, tensorOf(t, ref, "hf.two_images.gen_logits"))},
	} {
		e := rel(c.got, c.want)
		if !(e <= 2e-2) {
			t.Errorf("%s: relative error %.3g > 2e-2", c.what, e)
		}
		t.Logf("%s: relative error %.3g", c.what, e)
	}
}

// TestLogitsCommandImageErrors: an image without reference pixels, a name
// missing from the reference, and a pad run of the wrong length are clear
// errors.
func TestLogitsCommandImageErrors(t *testing.T) {
	refPath := filepath.Join(vlFixture, "reference.safetensors")
	ref := openTensors(t, refPath)
	promptT, _ := ref.Tensor("hf.single.prompt_ids")
	ids := promptFlag(promptT)
	refPath = pixelValuesFile(t, ref, "image0")
	short := strings.Replace(ids, "1019,", "", 1)
	model := filepath.Join(vlFixture, "hf-bf16")
	img := filepath.Join(vlFixture, "images", "image0.png")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--ids", ids, "--image", filepath.Join(vlFixture, "hf-bf16", "config.json")}, "not an image"},
		{[]string{"--ids", ids, "--image", "photo.png", "--pixel-values", refPath}, "no photo.pixel_values"},
		{[]string{"--ids", short, "--image", img, "--pixel-values", refPath}, "79 <|image_pad|> tokens"},
		{[]string{"--ids", ids, "--pixel-values", refPath}, "--pixel-values needs"},
	} {
		cmd := newLogitsCmd()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(append([]string{"--model", model, "--out", filepath.Join(t.TempDir(), "o.safetensors")}, c.args...))
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args[2:], err, c.want)
		} else if strings.Contains(c.want, "79") && !strings.Contains(err.Error(), "needs 80") {
			t.Errorf("the count error names one number only: %v", err)
		}
	}
}

func floats(t *testing.T, tn safetensors.Tensor) []float32 {
	v, err := safetensors.ToFloat32(tn)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func rel(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var d, m float64
	for i := range want {
		d = max(d, math.Abs(float64(got[i]-want[i])))
		m = max(m, math.Abs(float64(want[i])))
	}
	return d / m
}

// pixelValuesFile writes the named images' NAME.pixel_values F32 and
// NAME.grid_thw, as the image processor's reference gives them, from the
// fixture's uint8 codes (pixel = float32((u − 127.5)/127.5), bit for bit;
// engine/internal/fixtures/testdata/README.md).
func pixelValuesFile(t *testing.T, ref *safetensors.File, names ...string) string {
	t.Helper()
	var specs []safetensors.TensorSpec
	var data [][]byte
	for _, n := range names {
		codes, ok1 := ref.Tensor(n + ".pixel_codes")
		grid, ok2 := ref.Tensor(n + ".grid_thw")
		if !ok1 || !ok2 {
			t.Fatalf("no %s.pixel_codes or %s.grid_thw", n, n)
		}
		px := make([]byte, 4*len(codes.Data))
		for i, u := range codes.Data {
			binary.LittleEndian.PutUint32(px[4*i:], math.Float32bits(float32((float64(u)-127.5)/127.5)))
		}
		specs = append(specs,
			safetensors.TensorSpec{Name: n + ".pixel_values", DType: safetensors.F32, Shape: codes.Shape},
			safetensors.TensorSpec{Name: n + ".grid_thw", DType: safetensors.I32, Shape: grid.Shape})
		data = append(data, px, grid.Data)
	}
	path := filepath.Join(t.TempDir(), "pixels.safetensors")
	if err := safetensors.WriteFile(path, specs, data, nil); err != nil {
		t.Fatal(err)
	}
	return path
}
