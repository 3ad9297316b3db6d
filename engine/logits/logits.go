// Package logits computes reference logits for a token prompt — the logits
// at every prompt position, then a greedy continuation through the cache
// with the logits that chose each token — and writes them as safetensors in
// the layout of the shared fixtures (prompt_logits, gen_ids, gen_logits),
// so any backend can be compared with transformers or with another backend.
// `suzuran logits` is its command line.
package logits

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

// Output is what Compute produced.
type Output struct {
	Vocab        int
	Prompt       []int
	PromptLogits []float32 // [len(Prompt), Vocab]
	GenIDs       []int
	GenLogits    []float32 // [len(GenIDs), Vocab]: row i chose GenIDs[i]
	// Wall time of the prompt pass and of the decode steps.
	PrefillTime, DecodeTime time.Duration
	// With images (ComputeImages): the images the tower took, in prompt
	// order, their embeddings [pad tokens, hidden] and every prompt
	// token's M-RoPE position.
	Images      []model.Image
	ImageEmbeds []float32
	Hidden      int
	Positions   [][3]int
}

// Compute runs ids through b in one pass with logits for every position,
// then generates gen tokens greedily: the first from the prompt's last row,
// each later one from a one-token decode pass fed the previous choice.
func Compute(b model.Backend, w *model.Weights, ids []int, gen int) (*Output, error) {
	return ComputeImages(b, w, nil, ids, nil, gen)
}

// ComputeImages is Compute for a prompt with images: each image through
// b's vision tower (vw), its embeddings at its run of <|image_pad|> tokens
// (the k-th image fills the k-th run, which must hold its merged patch
// count), every row at its M-RoPE position, decoding at T + rope_delta.
func ComputeImages(b model.Backend, w *model.Weights, vw *model.VisionWeights, ids []int, images []model.Image, gen int) (*Output, error) {
	if len(ids) == 0 {
		return nil, fmt.Errorf("no prompt ids given")
	}
	if gen < 0 {
		return nil, fmt.Errorf("cannot generate %d tokens", gen)
	}
	for _, id := range ids {
		if id < 0 || id >= w.Config.VocabSize {
			return nil, fmt.Errorf("prompt id %d is outside the vocabulary [0, %d)", id, w.Config.VocabSize)
		}
	}
	seq, err := b.NewSequence(len(ids) + gen)
	if err != nil {
		return nil, err
	}
	defer seq.Close()
	greedy := &model.Sampling{}
	out := &Output{Vocab: w.LMHead.Out, Prompt: append([]int(nil), ids...)}
	in := model.Input{IDs: ids, Logits: model.LogitsAll}
	if len(images) > 0 {
		if err := imageInput(b, w, vw, images, out, &in); err != nil {
			return nil, err
		}
	}
	if gen > 0 {
		in.Sample = greedy
	}
	start := time.Now()
	res, err := model.Run(b, w, seq, in)
	if err != nil {
		return nil, fmt.Errorf("prompt pass on %s: %w", b.Name(), err)
	}
	out.PrefillTime = time.Since(start)
	if len(res.Logits) != len(ids)*out.Vocab {
		return nil, fmt.Errorf("%s returned %d logits for %d positions of %d", b.Name(), len(res.Logits), len(ids), out.Vocab)
	}
	out.PromptLogits = res.Logits
	if gen == 0 {
		return out, nil
	}
	out.GenIDs = append(out.GenIDs, res.Token)
	out.GenLogits = append(out.GenLogits, res.Logits[(len(ids)-1)*out.Vocab:]...)
	start = time.Now()
	for len(out.GenIDs) < gen {
		r, err := model.Run(b, w, seq, model.Input{Logits: model.LogitsLast, Sample: greedy})
		if err != nil {
			return nil, fmt.Errorf("decode step %d on %s: %w", len(out.GenIDs), b.Name(), err)
		}
		out.GenIDs = append(out.GenIDs, r.Token)
		out.GenLogits = append(out.GenLogits, r.Logits...)
	}
	out.DecodeTime = time.Since(start)
	return out, nil
}

// Write saves the output as a safetensors file: prompt_ids I32 [T],
// prompt_logits F32 [T, V], and with a continuation gen_ids I32 [N] and
// gen_logits F32 [N, V]; with images, image{k}.pixel_values F32
// [patches, 1536] and image{k}.grid_thw I32 [3] (k in prompt order, from
// 0), image_embeds F32 [pad tokens, hidden] and position_ids I32 [3, T].
func (o *Output) Write(path string) error {
	specs := []safetensors.TensorSpec{
		{Name: "prompt_ids", DType: safetensors.I32, Shape: []int{len(o.Prompt)}},
		{Name: "prompt_logits", DType: safetensors.F32, Shape: []int{len(o.Prompt), o.Vocab}},
	}
	data := [][]byte{int32s(o.Prompt), float32s(o.PromptLogits)}
	for k, im := range o.Images {
		specs = append(specs,
			safetensors.TensorSpec{Name: fmt.Sprintf("image%d.pixel_values", k), DType: safetensors.F32, Shape: []int{model.Patches(im.Grid), len(im.Pixels) / model.Patches(im.Grid)}},
			safetensors.TensorSpec{Name: fmt.Sprintf("image%d.grid_thw", k), DType: safetensors.I32, Shape: []int{3}})
		data = append(data, float32s(im.Pixels), int32s(im.Grid[:]))
	}
	if len(o.Images) > 0 {
		T := len(o.Prompt)
		pos := make([]int, 3*T)
		for t, p := range o.Positions {
			pos[t], pos[T+t], pos[2*T+t] = p[0], p[1], p[2]
		}
		specs = append(specs,
			safetensors.TensorSpec{Name: "image_embeds", DType: safetensors.F32, Shape: []int{len(o.ImageEmbeds) / o.Hidden, o.Hidden}},
			safetensors.TensorSpec{Name: "position_ids", DType: safetensors.I32, Shape: []int{3, T}})
		data = append(data, float32s(o.ImageEmbeds), int32s(pos))
	}
	if len(o.GenIDs) > 0 {
		specs = append(specs,
			safetensors.TensorSpec{Name: "gen_ids", DType: safetensors.I32, Shape: []int{len(o.GenIDs)}},
			safetensors.TensorSpec{Name: "gen_logits", DType: safetensors.F32, Shape: []int{len(o.GenIDs), o.Vocab}})
		data = append(data, int32s(o.GenIDs), float32s(o.GenLogits))
	}
	return safetensors.WriteFile(path, specs, data, nil)
}

func int32s(v []int) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(int32(x)))
	}
	return b
}

func float32s(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// imageInput encodes the images and sets the prompt pass's embeddings and
// positions.
func imageInput(b model.Backend, w *model.Weights, vw *model.VisionWeights, images []model.Image, out *Output, in *model.Input) error {
	vc := w.Config.Vision
	if vc == nil || vw == nil {
		return fmt.Errorf("the model has no vision tower: it reads no images")
	}
	enc, ok := b.(model.VisionEncoder)
	if _, takes := b.(model.ImageInputs); !ok || !takes {
		return fmt.Errorf("the %s backend does not run images yet: use the cpu backend", b.Name())
	}
	var grids [][3]int
	for k := range images {
		if err := vc.CheckImage(&images[k]); err != nil {
			return fmt.Errorf("image %d: %w", k, err)
		}
		grids = append(grids, images[k].Grid)
	}
	pos, _, err := model.RopePositions(vc, out.Prompt, grids)
	if err != nil {
		return err
	}
	H := w.Config.HiddenSize
	out.Images, out.Positions, out.Hidden = images, pos, H
	in.Positions = pos
	in.Embeds = make([][]float32, len(out.Prompt))
	row := 0
	for k := range images {
		e, err := enc.EncodeImage(vw, &images[k])
		if err != nil {
			return fmt.Errorf("image %d: %w", k, err)
		}
		out.ImageEmbeds = append(out.ImageEmbeds, e...)
		for i := range len(e) / H {
			for out.Prompt[row] != vc.ImageTokenID {
				row++
			}
			in.Embeds[row] = e[i*H : (i+1)*H]
			row++
		}
	}
	return nil
}
