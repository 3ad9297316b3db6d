package checkpoint

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

const visionFixture = "../internal/fixtures/testdata/qwen35moe-vl-tiny"

// TestVisionLazyAndBothLayouts: Load binds no vision tensor; Vision binds
// the tower once, and the two layouts give the same tower (the MLX patch
// kernel, stored channels-last, permuted into the pixel row's order).
func TestVisionLazyAndBothLayouts(t *testing.T) {
	var towers []*model.VisionWeights
	for _, layout := range []string{"hf-bf16", "mlx-4bit"} {
		m, err := Load(filepath.Join(visionFixture, layout))
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.vision.w != nil || m.vision.err != nil {
			t.Fatalf("%s: the tower was bound by Load", layout)
		}
		v := m.Weights.Config.Vision
		if v == nil || v.Depth != 2 || v.HiddenSize != 64 || v.NumPositions != 36 || v.ImageTokenID != 1019 || m.Weights.Config.MRoPESection != [3]int{4, 2, 2} {
			t.Fatalf("%s: vision config %+v, M-RoPE %v", layout, v, m.Weights.Config.MRoPESection)
		}
		vw, err := m.Vision()
		if err != nil {
			t.Fatal(err)
		}
		again, _ := m.Vision()
		if again != vw {
			t.Fatalf("%s: Vision bound the tower twice", layout)
		}
		if vw.Blocks[0].FC1.DType != model.BF16 {
			t.Fatalf("%s: fc1 is %v, the checkpoint stores it bf16", layout, vw.Blocks[0].FC1.DType)
		}
		towers = append(towers, vw)
	}
	a, b := &towers[0].PatchEmbed, &towers[1].PatchEmbed
	for i := range a.Out {
		for j := range a.In {
			if a.At(i, j) != b.At(i, j) {
				t.Fatalf("patch kernel (%d, %d): hub %v, mlx %v", i, j, a.At(i, j), b.At(i, j))
			}
		}
	}
	if !slices.Equal(towers[0].PosEmbed, towers[1].PosEmbed) || !slices.Equal(towers[0].Merger.FC2Bias, towers[1].Merger.FC2Bias) {
		t.Fatal("the layouts' towers differ")
	}
}

// TestVisionQuantizedLinear: a vision Linear stored as MLX affine codes
// (.weight U32, .scales and .biases), with the quantization block's
// default 4 bits, is bound Affine and dequantizes to what was encoded.
func TestVisionQuantizedLinear(t *testing.T) {
	src := filepath.Join(visionFixture, "mlx-4bit")
	dir := t.TempDir()
	for _, f := range []string{"config.json", "generation_config.json"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := safetensors.Open(filepath.Join(src, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	const name = "vision_tower.blocks.0.mlp.linear_fc1"
	var specs []safetensors.TensorSpec
	var data [][]byte
	var want []float32 // the dequantized values written
	for _, n := range in.Names() {
		tn, _ := in.Tensor(n)
		if n != name+".weight" {
			specs = append(specs, safetensors.TensorSpec{Name: n, DType: tn.DType, Shape: tn.Shape})
			data = append(data, tn.Data)
			continue
		}
		out, inW := tn.Shape[0], tn.Shape[1] // [80, 64]: one group of 64 per row
		codes := make([]byte, out*inW/2)
		scales, biases := make([]byte, 2*out), make([]byte, 2*out)
		for o := range out {
			s, b := float32(1.0/64), float32(-0.25)
			binary.LittleEndian.PutUint16(scales[2*o:], safetensors.Float32ToBF16(s))
			binary.LittleEndian.PutUint16(biases[2*o:], safetensors.Float32ToBF16(b))
			for j := range inW {
				q := uint32((o*7 + j*3) % 16)
				word := binary.LittleEndian.Uint32(codes[4*((o*inW+j)/8):])
				word |= q << (4 * uint(j%8))
				binary.LittleEndian.PutUint32(codes[4*((o*inW+j)/8):], word)
				want = append(want, s*float32(q)+b)
			}
		}
		specs = append(specs,
			safetensors.TensorSpec{Name: name + ".weight", DType: safetensors.U32, Shape: []int{out, inW / 8}},
			safetensors.TensorSpec{Name: name + ".scales", DType: safetensors.BF16, Shape: []int{out, 1}},
			safetensors.TensorSpec{Name: name + ".biases", DType: safetensors.BF16, Shape: []int{out, 1}})
		data = append(data, codes, scales, biases)
	}
	if err := safetensors.WriteFile(filepath.Join(dir, "model.safetensors"), specs, data, map[string]string{"format": "mlx"}); err != nil {
		t.Fatal(err)
	}
	m, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	vw, err := m.Vision()
	if err != nil {
		t.Fatal(err)
	}
	fc1 := &vw.Blocks[0].FC1
	if fc1.DType != model.Affine || fc1.Bits != 4 || fc1.GroupSize != 64 {
		t.Fatalf("fc1 bound as %v %d-bit group %d, want affine 4-bit group 64", fc1.DType, fc1.Bits, fc1.GroupSize)
	}
	for i := range fc1.Out {
		for j := range fc1.In {
			if got := fc1.At(i, j); math.Abs(float64(got-want[i*fc1.In+j])) > 0 {
				t.Fatalf("fc1 (%d, %d) = %v, want %v", i, j, got, want[i*fc1.In+j])
			}
		}
	}
}

// TestVisionMissing: a checkpoint without a tower says so.
func TestVisionMissing(t *testing.T) {
	m, err := Load("testdata/qwen35moe-alt/hf-bf16")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if _, err := m.Vision(); err == nil || !strings.Contains(err.Error(), "vision_config") {
		t.Fatalf("Vision on a checkpoint without a usable vision_config: %v", err)
	}
}

// TestVisionFullSizeConfigs reads the real model's vision_config in both
// layouts.
func TestVisionFullSizeConfigs(t *testing.T) {
	for _, f := range []string{"qwen3.6-35b-a3b.json", "qwen3.6-35b-a3b.mlx-4bit.json"} {
		path := filepath.Join("..", "synth", "configs", f)
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		c, err := ParseConfig(raw, path)
		if err != nil {
			t.Fatal(err)
		}
		v := c.Vision
		if c.VisionErr != nil || v == nil {
			t.Fatalf("%s: no vision config: %v", f, c.VisionErr)
		}
		got := [...]int{v.Depth, v.HiddenSize, v.NumHeads, v.Intermediate, v.PatchWidth(), v.SpatialMerge, v.OutHiddenSize, v.GridSide(), v.ImageTokenID, v.VisionStartTokenID, v.VisionEndTokenID}
		want := [...]int{27, 1152, 16, 4304, 1536, 2, 2048, 48, 248056, 248053, 248054}
		if got != want || c.MRoPESection != [3]int{11, 11, 10} {
			t.Fatalf("%s: vision %v, M-RoPE %v; want %v, [11 11 10]", f, got, c.MRoPESection, want)
		}
	}
}
