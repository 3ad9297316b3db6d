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
}

// Compute runs ids through b in one pass with logits for every position,
// then generates gen tokens greedily: the first from the prompt's last row,
// each later one from a one-token decode pass fed the previous choice.
func Compute(b model.Backend, w *model.Weights, ids []int, gen int) (*Output, error) {
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
// gen_logits F32 [N, V].
func (o *Output) Write(path string) error {
	specs := []safetensors.TensorSpec{
		{Name: "prompt_ids", DType: safetensors.I32, Shape: []int{len(o.Prompt)}},
		{Name: "prompt_logits", DType: safetensors.F32, Shape: []int{len(o.Prompt), o.Vocab}},
	}
	data := [][]byte{int32s(o.Prompt), float32s(o.PromptLogits)}
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
