package bench

import "github.com/suzuran-app/suzuran/engine/model"

// Traffic is the memory one decode step must move at a given context, by
// the sizes of what it reads: the basis of the achieved-bandwidth figure.
type Traffic struct {
	Context int `json:"context"`
	// WeightBytes: the active weights of one token — the embedding row,
	// every mixer matrix, the router, the shared expert, ExpertsPerToken
	// routed experts per layer, the head, and the norm and conv vectors.
	WeightBytes int64 `json:"weight_bytes"`
	// StateBytes: the KV cache read by the attention layers at this context
	// and the DeltaNet conv and recurrent state, read and written.
	StateBytes int64 `json:"state_bytes"`
	TotalBytes int64 `json:"total_bytes"`
}

// DecodeTraffic computes Traffic for a decode step at context tokens;
// kvElemBytes is the KV cache's element size (4 for the CPU's f32 cache, 2
// for the GPU's bf16 one).
func DecodeTraffic(w *model.Weights, context, kvElemBytes int) Traffic {
	c := &w.Config
	t := Traffic{Context: context}
	t.WeightBytes = matrixBytes(&w.Embed)/int64(max(w.Embed.Out, 1)) + matrixBytes(&w.LMHead) + vecBytes(w.FinalNorm)
	for i := range w.Layers {
		l := &w.Layers[i]
		t.WeightBytes += vecBytes(l.InputNorm) + vecBytes(l.PostNorm)
		if d := l.DeltaNet; d != nil {
			t.WeightBytes += matrixBytes(&d.QKV) + matrixBytes(&d.Z) + matrixBytes(&d.B) + matrixBytes(&d.A) + matrixBytes(&d.Out)
			t.WeightBytes += vecBytes(d.ALog) + vecBytes(d.DtBias) + vecBytes(d.Norm)
			for _, taps := range d.Conv {
				t.WeightBytes += vecBytes(taps)
			}
			channels := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
			recurrent := int64(c.LinearValueHeads) * int64(c.LinearKeyHeadDim) * int64(c.LinearValueHeadDim) * 4
			conv := int64(c.ConvKernel-1) * int64(channels) * 4
			t.StateBytes += 2 * (recurrent + conv)
		}
		if a := l.Attention; a != nil {
			t.WeightBytes += matrixBytes(&a.Q) + matrixBytes(&a.K) + matrixBytes(&a.V) + matrixBytes(&a.O)
			t.WeightBytes += vecBytes(a.QNorm) + vecBytes(a.KNorm)
			// Keys and values of every cached position, plus the new row.
			t.StateBytes += 2 * int64(context+1) * int64(c.NumKVHeads) * int64(c.HeadDim) * int64(kvElemBytes)
		}
		m := &l.MoE
		t.WeightBytes += matrixBytes(&m.Router) + matrixBytes(&m.SharedGate) + matrixBytes(&m.SharedUp) +
			matrixBytes(&m.SharedDown) + matrixBytes(&m.SharedExpert)
		if len(m.Gate) > 0 {
			perExpert := matrixBytes(&m.Gate[0]) + matrixBytes(&m.Up[0]) + matrixBytes(&m.Down[0])
			t.WeightBytes += int64(c.ExpertsPerToken) * perExpert
		}
	}
	t.TotalBytes = t.WeightBytes + t.StateBytes
	return t
}

func matrixBytes(m *model.Matrix) int64 { return int64(len(m.Data) + len(m.Scales) + len(m.Biases)) }

func vecBytes(v []float32) int64 { return 4 * int64(len(v)) }
