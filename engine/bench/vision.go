package bench

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// VisionSettings say what RunVision measures.
type VisionSettings struct {
	// Tokens is the image's token count (merged patches); the image is
	// the squarest grid with that many (1024: 32 × 32 merged, 64 × 64
	// patches, a 1024 × 1024 picture).
	Tokens int `json:"tokens"`
	// Depth is the synthetic tower's block count (0: the config's, 27).
	Depth int `json:"depth"`
	// Runs of the encode, timed one by one (default 1).
	Runs int    `json:"runs"`
	Seed uint64 `json:"seed"`
	// FollowUp runs two requests through the engine on a backend that
	// takes images in its passes: the image with a question, then the same
	// prompt, the answer and a second question, and reports what each
	// encoded and prefilled.
	FollowUp bool `json:"follow_up"`
	// PlanOnly, on a GPU backend, records the tower's command buffer and
	// discards it (gpu.Backend.PlanImage): the counters of the full-size
	// tower without the run, which takes the emulator hours.
	PlanOnly bool `json:"plan_only"`
}

// VisionResult is the tower's benchmark on one image.
type VisionResult struct {
	Settings     VisionSettings `json:"settings"`
	Grid         [3]int         `json:"grid"`
	Patches      int            `json:"patches"`
	Depth        int            `json:"depth"`
	ConfigDepth  int            `json:"config_depth"`
	Hidden       int            `json:"hidden"`
	Heads        int            `json:"heads"`
	Intermediate int            `json:"intermediate"`
	WeightBytes  int64          `json:"weight_bytes"`
	// EncodeSeconds is the wall time of one EncodeImage call, CPUSeconds
	// the process's CPU time during it.
	EncodeSeconds Stat `json:"encode_s"`
	CPUSeconds    Stat `json:"cpu_s"`
	// Counters are the GPU backend's per-image counters (Stats.Vision).
	Counters []Counter     `json:"counters,omitempty"`
	FollowUp []FollowUpRun `json:"follow_up,omitempty"`
}

// FollowUpRun is one request of the follow-up measurement.
type FollowUpRun struct {
	PromptTokens    int     `json:"prompt_tokens"`
	CachedTokens    int     `json:"cached_tokens"`
	PrefilledTokens int     `json:"prefilled_tokens"`
	ImagesEncoded   int     `json:"images_encoded"`
	PrefillSeconds  float64 `json:"prefill_s"`
}

// ImageGrid is the (temporal, height, width) patch grid of the squarest
// image of tokens merged patches for a merge size m.
func ImageGrid(tokens, m int) [3]int {
	h := int(math.Sqrt(float64(tokens)))
	for tokens%h != 0 {
		h--
	}
	return [3]int{1, m * h, m * (tokens / h)}
}

// SyntheticVision makes a tower of c's shapes with depth blocks (0: c's
// depth) and random bf16 weights, as mlx-community's checkpoints keep the
// tower (their quantization block leaves it unquantized). Each Linear's
// weights are normal with standard deviation 1/√in, its bias 0.02 · normal;
// the LayerNorms are 1 with zero bias; the position embeddings 0.02 ·
// normal.
func SyntheticVision(c model.VisionConfig, depth int, seed uint64) *model.VisionWeights {
	if depth > 0 {
		c.Depth = depth
	}
	r := rand.New(rand.NewPCG(seed, 0x76697369))
	mat := func(name string, out, in int) model.Matrix {
		data := make([]byte, 2*out*in)
		s := 1 / math.Sqrt(float64(in))
		for i := range out * in {
			binary.LittleEndian.PutUint16(data[2*i:], safetensors.Float32ToBF16(float32(r.NormFloat64()*s)))
		}
		return model.Matrix{Name: name, Out: out, In: in, DType: model.BF16, Data: data}
	}
	vec := func(n int, scale, base float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(base + scale*r.NormFloat64())
		}
		return v
	}
	W, I := c.HiddenSize, c.Intermediate
	w := &model.VisionWeights{Config: c,
		PatchEmbed:     mat("patch_embed.proj.weight", W, c.PatchWidth()),
		PatchEmbedBias: vec(W, 0.02, 0),
		PosEmbed:       vec(c.NumPositions*W, 0.02, 0),
	}
	for i := range c.Depth {
		p := fmt.Sprintf("blocks.%d.", i)
		w.Blocks = append(w.Blocks, model.VisionBlock{
			Norm1: vec(W, 0, 1), Norm1Bias: vec(W, 0, 0),
			QKV: mat(p+"attn.qkv.weight", 3*W, W), QKVBias: vec(3*W, 0.02, 0),
			Proj: mat(p+"attn.proj.weight", W, W), ProjBias: vec(W, 0.02, 0),
			Norm2: vec(W, 0, 1), Norm2Bias: vec(W, 0, 0),
			FC1: mat(p+"mlp.linear_fc1.weight", I, W), FC1Bias: vec(I, 0.02, 0),
			FC2: mat(p+"mlp.linear_fc2.weight", W, I), FC2Bias: vec(W, 0.02, 0),
		})
	}
	m2 := c.SpatialMerge * c.SpatialMerge * W
	w.Merger = model.VisionMerger{Norm: vec(W, 0, 1), NormBias: vec(W, 0, 0),
		FC1: mat("merger.linear_fc1.weight", m2, m2), FC1Bias: vec(m2, 0.02, 0),
		FC2: mat("merger.linear_fc2.weight", c.OutHiddenSize, m2), FC2Bias: vec(c.OutHiddenSize, 0.02, 0)}
	return w
}

// syntheticImage is an image of grid with pixels uniform in [−1, 1], as
// the processor's normalised values lie.
func syntheticImage(c *model.VisionConfig, grid [3]int, seed uint64) model.Image {
	r := rand.New(rand.NewPCG(seed, 0x696d67))
	px := make([]float32, model.Patches(grid)*c.PatchWidth())
	for i := range px {
		px[i] = float32(2*r.Float64() - 1)
	}
	h := sha256.New()
	binary.Write(h, binary.LittleEndian, px)
	im := model.Image{Pixels: px, Grid: grid}
	copy(im.Hash[:], h.Sum(nil))
	return im
}

// RunVision measures the vision tower of t's model at its real width: a
// synthetic tower of the config's shapes (SyntheticVision) encoding one
// image of s.Tokens tokens, and with s.FollowUp the follow-up question
// through the engine (tok decodes its answers).
func RunVision(t Target, s VisionSettings, tok *tokenizer.Tokenizer, log io.Writer) (*VisionResult, error) {
	if log == nil {
		log = io.Discard
	}
	vc := t.Weights.Config.Vision
	if vc == nil {
		return nil, errors.New("bench: the model's config has no vision_config: the tower's shapes are unknown")
	}
	enc, ok := t.Backend.(model.VisionEncoder)
	if !ok {
		return nil, fmt.Errorf("bench: the %s backend does not run the vision tower", t.Backend.Name())
	}
	if s.Tokens <= 0 {
		return nil, fmt.Errorf("bench: image tokens %d: give a positive count", s.Tokens)
	}
	if s.Runs <= 0 {
		s.Runs = 1
	}
	tower := SyntheticVision(*vc, s.Depth, s.Seed)
	fmt.Fprintf(log, "%s: synthetic vision tower: %d blocks of %d wide, %d heads, MLP %d\n", t.Kind, tower.Config.Depth, vc.HiddenSize, vc.NumHeads, vc.Intermediate)
	c := &tower.Config
	grid := ImageGrid(s.Tokens, c.SpatialMerge)
	im := syntheticImage(c, grid, s.Seed)
	r := &VisionResult{Settings: s, Grid: grid, Patches: model.Patches(grid), Depth: c.Depth, ConfigDepth: vc.Depth,
		Hidden: c.HiddenSize, Heads: c.NumHeads, Intermediate: c.Intermediate}
	r.WeightBytes = int64(len(tower.PatchEmbed.Data) + len(tower.Merger.FC1.Data) + len(tower.Merger.FC2.Data))
	for i := range tower.Blocks {
		k := &tower.Blocks[i]
		r.WeightBytes += int64(len(k.QKV.Data) + len(k.Proj.Data) + len(k.FC1.Data) + len(k.FC2.Data))
	}
	if s.PlanOnly {
		g, ok := t.Backend.(*gpu.Backend)
		if !ok {
			return nil, fmt.Errorf("bench: only a GPU backend can plan the tower without running it, not %s", t.Backend.Name())
		}
		plan, err := g.PlanImage(tower, &im)
		if err != nil {
			return nil, fmt.Errorf("bench: planning the image: %w", err)
		}
		r.Counters = visionCounters(plan)
		return r, nil
	}
	var wall, cpuT []float64
	for i := range s.Runs {
		cpu0, t0 := processCPUTime(), time.Now()
		out, err := enc.EncodeImage(tower, &im)
		if err != nil {
			return nil, fmt.Errorf("bench: encoding the image: %w", err)
		}
		wall = append(wall, time.Since(t0).Seconds())
		cpuT = append(cpuT, (processCPUTime() - cpu0).Seconds())
		if len(out) != s.Tokens*c.OutHiddenSize {
			return nil, fmt.Errorf("bench: the tower gave %d values, want %d", len(out), s.Tokens*c.OutHiddenSize)
		}
		fmt.Fprintf(log, "%s: %d-token image (grid %v, %d blocks), run %d/%d: %.2f s (CPU %.1f s)\n",
			t.Kind, s.Tokens, grid, c.Depth, i+1, s.Runs, wall[i], cpuT[i])
	}
	r.EncodeSeconds, r.CPUSeconds = Summarize(wall), Summarize(cpuT)
	if g, ok := t.Backend.(*gpu.Backend); ok {
		r.Counters = visionCounters(g.Stats().Vision)
	}
	if s.FollowUp {
		if _, ok := t.Backend.(model.ImageInputs); !ok {
			return r, fmt.Errorf("bench: the %s backend does not take images in its passes: no follow-up", t.Backend.Name())
		}
		if tok == nil {
			return r, errors.New("bench: the follow-up needs a tokenizer")
		}
		runs, err := followUp(t, tower, &im, tok, log)
		if err != nil {
			return r, err
		}
		r.FollowUp = runs
	}
	return r, nil
}

func visionCounters(v gpu.Counters) []Counter {
	var out []Counter
	per := func(name string, x int64) {
		if v.Passes > 0 {
			out = append(out, Counter{Phase: "vision", Name: name, Value: float64(x) / float64(v.Passes)})
		}
	}
	per("command buffers per image", v.CommandBuffers)
	per("host waits per image", v.HostWaits)
	per("mid-step readbacks per image", v.MidStepReadbacks)
	per("dispatches per image", v.Dispatches)
	per("planned bytes per image", v.ReadBytes+v.WriteBytes)
	per("minimum bytes per image", v.MinimumBytes)
	if v.MinimumBytes > 0 {
		out = append(out, Counter{Phase: "vision", Name: "planned / minimum bytes",
			Value: float64(v.ReadBytes+v.WriteBytes) / float64(v.MinimumBytes)})
	}
	return out
}

// followUp asks about the image, then asks again after the answer: the
// second request must find the image in the prefix cache.
func followUp(t Target, tower *model.VisionWeights, im *model.Image, tok *tokenizer.Tokenizer, log io.Writer) ([]FollowUpRun, error) {
	c := &tower.Config
	n := c.Tokens(im.Grid)
	r := rand.New(rand.NewPCG(7, 7))
	// Text ids below the image tokens (which lie above the ordinary
	// vocabulary) and the vocabulary's end.
	hi := min(20000, c.ImageTokenID, c.VisionStartTokenID, c.VisionEndTokenID, t.Weights.Embed.Out)
	text := func(k int) []int {
		ids := make([]int, k)
		for i := range ids {
			ids[i] = 1 + r.IntN(hi-1)
		}
		return ids
	}
	prompt := text(16)
	prompt = append(prompt, c.VisionStartTokenID)
	for range n {
		prompt = append(prompt, c.ImageTokenID)
	}
	prompt = append(prompt, c.VisionEndTokenID)
	prompt = append(prompt, text(16)...)
	e, err := engine.New(engine.Options{Backend: t.Backend, Weights: t.Weights, Tokenizer: tok,
		ContextTokens: len(prompt) + 64, Parallel: 1, PrefillChunk: 512,
		Vision: func() (*model.VisionWeights, error) { return tower, nil }})
	if err != nil {
		return nil, fmt.Errorf("bench: follow-up: %w", err)
	}
	defer e.Close()
	var out []FollowUpRun
	ask := func(p []int) ([]int, error) {
		st, err := e.Submit(context.Background(), engine.Request{Prompt: p, Images: []model.Image{*im}, MaxTokens: 2})
		if err != nil {
			return nil, err
		}
		var gen []int
		for ev := range st.Events {
			gen = append(gen, ev.IDs...)
		}
		s, err := st.Result()
		if err != nil {
			return nil, err
		}
		out = append(out, FollowUpRun{PromptTokens: s.PromptTokens, CachedTokens: s.CachedTokens,
			PrefilledTokens: s.PrefilledTokens, ImagesEncoded: s.ImagesEncoded, PrefillSeconds: s.PrefillDuration.Seconds()})
		fmt.Fprintf(log, "%s: follow-up request %d: %d prompt tokens, %d cached, %d prefilled, %d images encoded, prefill %.2f s\n",
			t.Kind, len(out), s.PromptTokens, s.CachedTokens, s.PrefilledTokens, s.ImagesEncoded, s.PrefillDuration.Seconds())
		return gen, nil
	}
	gen, err := ask(prompt)
	if err != nil {
		return nil, fmt.Errorf("bench: follow-up, first question: %w", err)
	}
	second := append(append(append([]int(nil), prompt...), gen...), text(16)...)
	if _, err := ask(second); err != nil {
		return nil, fmt.Errorf("bench: follow-up, second question: %w", err)
	}
	return out, nil
}

// VisionTable prints r in words.
func VisionTable(w io.Writer, kind string, r *VisionResult) error {
	fmt.Fprintf(w, "vision tower on %s: %d blocks (the config has %d) of %d wide, %d heads, MLP %d, %.2f GB of bf16 weights\n",
		kind, r.Depth, r.ConfigDepth, r.Hidden, r.Heads, r.Intermediate, float64(r.WeightBytes)/1e9)
	if e := r.EncodeSeconds; e.N > 0 {
		fmt.Fprintf(w, "image: %d tokens, grid %v (%d patches): encode %.2f s (%.2f–%.2f, %d runs), CPU %.1f s\n",
			r.Settings.Tokens, r.Grid, r.Patches, e.Median, e.Min, e.Max, e.N, r.CPUSeconds.Median)
	} else {
		fmt.Fprintf(w, "image: %d tokens, grid %v (%d patches): planned, not run\n", r.Settings.Tokens, r.Grid, r.Patches)
	}
	for _, c := range r.Counters {
		fmt.Fprintf(w, "%s: %s: %.6g\n", c.Phase, c.Name, c.Value)
	}
	for i, f := range r.FollowUp {
		fmt.Fprintf(w, "request %d: %d prompt tokens, %d cached, %d prefilled, %d images encoded, prefill %.2f s\n",
			i+1, f.PromptTokens, f.CachedTokens, f.PrefilledTokens, f.ImagesEncoded, f.PrefillSeconds)
	}
	return nil
}
