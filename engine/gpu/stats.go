package gpu

import (
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Counters are what the backend counted over a set of passes. Read and write
// bytes are the sums of the dispatches' own declarations (device.Dispatch
// ReadBytes and WriteBytes): the traffic the pass plans, to be compared
// with MinimumBytes, what any implementation must move.
type Counters struct {
	Passes int64
	Tokens int64
	// Sequences counts each pass's segments: a batched decode step of four
	// sequences counts one pass, four tokens and four sequences.
	Sequences      int64
	Dispatches     int64
	CommandBuffers int64
	HostWaits      int64
	// MidStepReadbacks counts host reads of device memory while a pass was
	// still recording or running. Reading results after Wait is not counted.
	MidStepReadbacks int64
	// HostSamples counts tokens chosen on the host (sampling parameters the
	// device does not run), each after its pass's Wait.
	HostSamples int64
	ReadBytes   int64
	WriteBytes  int64
	// SharedExpertBytes is the part of ReadBytes that a batched step did
	// not read because several of its rows chose the same routed expert:
	// the grouped decode kernels read such an expert once, but a pass
	// declares its traffic when it is recorded, before the routing is
	// known, so it counts every row's experts; Wait counts the repeats.
	SharedExpertBytes int64
	// MinimumBytes is, for decode passes, the sum of MinimumDecodeBytes at
	// each pass's position; zero for prefill.
	MinimumBytes int64
}

func (c *Counters) add(o Counters) {
	c.Passes += o.Passes
	c.Tokens += o.Tokens
	c.Sequences += o.Sequences
	c.Dispatches += o.Dispatches
	c.CommandBuffers += o.CommandBuffers
	c.HostWaits += o.HostWaits
	c.MidStepReadbacks += o.MidStepReadbacks
	c.HostSamples += o.HostSamples
	c.ReadBytes += o.ReadBytes
	c.WriteBytes += o.WriteBytes
	c.SharedExpertBytes += o.SharedExpertBytes
	c.MinimumBytes += o.MinimumBytes
}

// Stats splits the counters by phase: a decode pass consumes one token, a
// prefill pass (a chunk) more.
type Stats struct {
	Prefill, Decode Counters
	// Vision counts the vision tower's runs, one pass per image: Tokens
	// are the image tokens made, MinimumBytes the tower's weights read once
	// with the pixels in and the embeddings out.
	Vision Counters
}

// Lines renders the stats in words, one counter per line, per token for
// decode and per chunk for prefill.
func (s Stats) Lines() []string {
	var out []string
	per := func(v, n int64) string {
		if n == 0 {
			return "n/a"
		}
		if v%n == 0 {
			return fmt.Sprint(v / n)
		}
		return fmt.Sprintf("%.2f", float64(v)/float64(n))
	}
	if d := s.Decode; d.Passes > 0 {
		out = append(out,
			fmt.Sprintf("decode: tokens: %d", d.Tokens),
			fmt.Sprintf("decode: command buffers per token: %s", per(d.CommandBuffers, d.Passes)),
			fmt.Sprintf("decode: host waits per token: %s", per(d.HostWaits, d.Passes)),
			fmt.Sprintf("decode: mid-step readbacks per token: %s", per(d.MidStepReadbacks, d.Passes)),
			fmt.Sprintf("decode: dispatches per token: %s", per(d.Dispatches, d.Passes)),
			fmt.Sprintf("decode: tokens sampled on the host: %d", d.HostSamples),
			fmt.Sprintf("decode: planned bytes per token: %s (read %s, write %s)",
				per(d.ReadBytes+d.WriteBytes, d.Passes), per(d.ReadBytes, d.Passes), per(d.WriteBytes, d.Passes)),
			fmt.Sprintf("decode: minimum bytes per token (active weights once, KV, state): %s", per(d.MinimumBytes, d.Passes)))
		if d.Sequences > d.Passes {
			// Batched steps: the counters above are per step.
			out = append(out,
				fmt.Sprintf("decode: sequences per step: %s", per(d.Sequences, d.Passes)),
				fmt.Sprintf("decode: bytes per step, experts several rows chose read once: %s (shared %s)",
					per(d.StepBytes(), d.Passes), per(d.SharedExpertBytes, d.Passes)))
		}
		if d.MinimumBytes > 0 {
			out = append(out, fmt.Sprintf("decode: planned / minimum bytes: %.3f",
				float64(d.ReadBytes+d.WriteBytes)/float64(d.MinimumBytes)))
		}
	}
	if p := s.Prefill; p.Passes > 0 {
		out = append(out,
			fmt.Sprintf("prefill: chunks: %d, tokens: %d", p.Passes, p.Tokens),
			fmt.Sprintf("prefill: command buffers per chunk: %s", per(p.CommandBuffers, p.Passes)),
			fmt.Sprintf("prefill: host waits per chunk: %s", per(p.HostWaits, p.Passes)),
			fmt.Sprintf("prefill: mid-step readbacks per chunk: %s", per(p.MidStepReadbacks, p.Passes)),
			fmt.Sprintf("prefill: dispatches per chunk: %s", per(p.Dispatches, p.Passes)),
			fmt.Sprintf("prefill: planned bytes per token: %s", per(p.ReadBytes+p.WriteBytes, p.Tokens)))
	}
	if v := s.Vision; v.Passes > 0 {
		out = append(out,
			fmt.Sprintf("vision: images: %d, tokens: %d", v.Passes, v.Tokens),
			fmt.Sprintf("vision: command buffers per image: %s", per(v.CommandBuffers, v.Passes)),
			fmt.Sprintf("vision: host waits per image: %s", per(v.HostWaits, v.Passes)),
			fmt.Sprintf("vision: dispatches per image: %s", per(v.Dispatches, v.Passes)),
			fmt.Sprintf("vision: planned bytes per image: %s", per(v.ReadBytes+v.WriteBytes, v.Passes)),
			fmt.Sprintf("vision: minimum bytes per image (weights once, pixels, embeddings): %s", per(v.MinimumBytes, v.Passes)))
		if v.MinimumBytes > 0 {
			out = append(out, fmt.Sprintf("vision: planned / minimum bytes: %.3f", float64(v.ReadBytes+v.WriteBytes)/float64(v.MinimumBytes)))
		}
	}
	return out
}

// StepBytes is what a step moves by the counters: the planned traffic less
// the routed experts that rows sharing them did not read again.
func (c Counters) StepBytes() int64 {
	return c.ReadBytes + c.WriteBytes - c.SharedExpertBytes
}

// MinimumDecodeBytes is the least memory traffic of one decode step at
// position pos with top-k routing: every weight the token uses read once
// (its embedding row, each layer's mixer, norms, router, the shared expert
// and k routed experts, the final norm and the head), the KV cache read up
// to and including the new token and that token's keys and values written,
// and the DeltaNet conv and recurrent state read and written once.
func (b *Backend) MinimumDecodeBytes(pos int) int64 {
	return b.minimumStepBytes([]int{pos})
}

// minimumStepBytes is MinimumDecodeBytes for a step that decodes one token
// of each sequence at the given positions together: the weights every row
// uses read once for all of them, and per sequence its embedding row, its k
// routed experts (counted as distinct: sharing them is the routing's luck,
// not a plan), its KV cache and its DeltaNet state.
func (b *Backend) minimumStepBytes(positions []int) int64 {
	c := &b.cfg
	w := b.w
	var n int64
	seqs := int64(len(positions))
	mat := func(m *model.Matrix) int64 { return b.mats[m].bytes }
	vec := func(v []float32) int64 { return int64(4 * len(v)) }
	emb := b.mats[&w.Embed]
	n += seqs * emb.bytes / int64(w.Embed.Out)
	for i := range w.Layers {
		l := &w.Layers[i]
		n += vec(l.InputNorm) + vec(l.PostNorm)
		if d := l.DeltaNet; d != nil {
			n += mat(&d.QKV) + mat(&d.Z) + mat(&d.B) + mat(&d.A) + mat(&d.Out)
			channels := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
			n += int64(4*channels*c.ConvKernel) + vec(d.ALog) + vec(d.DtBias) + vec(d.Norm)
			state := int64(4*c.LinearValueHeads*c.LinearValueHeadDim*c.LinearKeyHeadDim) +
				int64(4*(c.ConvKernel-1)*channels)
			n += seqs * 2 * state
		}
		if a := l.Attention; a != nil {
			n += mat(&a.Q) + mat(&a.K) + mat(&a.V) + mat(&a.O) + vec(a.QNorm) + vec(a.KNorm)
			elem := int64(2)
			if b.opt.KVCacheF32 {
				elem = 4
			}
			kv := 2 * int64(c.NumKVHeads*c.HeadDim) * elem // k and v of one token
			for _, pos := range positions {
				n += kv*int64(pos+1) + kv
			}
		}
		m := &l.MoE
		dm := b.experts[m]
		n += mat(&m.Router) + mat(&m.SharedExpert) + mat(&m.SharedGate) + mat(&m.SharedUp) + mat(&m.SharedDown)
		n += seqs * int64(c.ExpertsPerToken) * (dm.gate.expertBytes + dm.up.expertBytes + dm.down.expertBytes)
	}
	n += vec(w.FinalNorm) + mat(&w.LMHead)
	return n
}
