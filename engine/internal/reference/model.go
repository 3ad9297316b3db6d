package reference

import (
	"cmp"
	"math"
	"slices"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The model composed of the steps, one function per block of MODEL.md.

// State is one sequence's state: the position, and per layer what the
// mixer carries from token to token.
type State struct {
	Pos    int
	Layers []LayerState
	// RopeNext is the M-RoPE position of the next text token: Pos plus
	// the rope delta once a prompt held images.
	RopeNext int
}

// LayerState is one layer's state: the conv rows and recurrent state of a
// DeltaNet layer, or the KV cache of an attention layer.
type LayerState struct {
	Conv [][]float64 // the K−1 rows before the next, pre-conv, oldest first
	S    [][]float64 // per value head, [Dk][Dv] (S[i][d] at S[i*Dv+d])
	// Keys and Values are per kv head, per position: keys after norm and
	// RoPE, as the cache stores them.
	Keys, Values [][][]float64
}

// NewState is the state before the first token: zero conv rows and
// recurrent state, empty caches.
func NewState(w *model.Weights) *State {
	c := &w.Config
	s := &State{Layers: make([]LayerState, len(w.Layers))}
	for i := range w.Layers {
		l := &s.Layers[i]
		if d := w.Layers[i].DeltaNet; d != nil {
			for range c.ConvKernel - 1 {
				l.Conv = append(l.Conv, make([]float64, len(d.Conv)))
			}
			for range c.LinearValueHeads {
				l.S = append(l.S, make([]float64, c.LinearKeyHeadDim*c.LinearValueHeadDim))
			}
		} else {
			l.Keys, l.Values = make([][][]float64, c.NumKVHeads), make([][][]float64, c.NumKVHeads)
		}
	}
	return s
}

// Clone is a deep copy of s.
func (s *State) Clone() *State {
	rows := func(x [][]float64) [][]float64 {
		out := make([][]float64, len(x))
		for i, r := range x {
			out[i] = slices.Clone(r)
		}
		return out
	}
	c := &State{Pos: s.Pos, RopeNext: s.RopeNext, Layers: make([]LayerState, len(s.Layers))}
	for i, l := range s.Layers {
		c.Layers[i] = LayerState{Conv: rows(l.Conv), S: rows(l.S)}
		for h := range l.Keys {
			c.Layers[i].Keys = append(c.Layers[i].Keys, rows(l.Keys[h]))
			c.Layers[i].Values = append(c.Layers[i].Values, rows(l.Values[h]))
		}
	}
	return c
}

// Forward runs ids through the model from the empty state and returns the
// logits of every position.
func Forward(w *model.Weights, ids []int) [][]float64 {
	logits, _ := NewState(w).Forward(w, ids)
	return logits
}

// Forward runs ids through the model from s, which it advances, and returns
// the logits of every position and the residual stream after the embedding
// and after each layer.
func (s *State) Forward(w *model.Weights, ids []int) (logits [][]float64, hidden [][][]float64) {
	return s.ForwardImages(w, ids, nil, nil)
}

// ForwardImages is Forward where embeds (when set, one entry per id) give
// the rows whose input is an image embedding instead of the token's, and
// positions (when set) each row's M-RoPE position; without them the rows
// take the next text positions (RopeNext on).
func (s *State) ForwardImages(w *model.Weights, ids []int, embeds [][]float32, positions [][3]int) (logits [][]float64, hidden [][][]float64) {
	x := Embed(&w.Embed, ids)
	for t, e := range embeds {
		if e != nil {
			x[t] = Float64(e)
		}
	}
	if positions == nil {
		for t := range ids {
			positions = append(positions, model.TextPosition(s.RopeNext+t))
		}
	}
	hidden = append(hidden, x)
	for i := range w.Layers {
		x = DecoderLayer(w, i, &s.Layers[i], x, positions)
		hidden = append(hidden, x)
	}
	s.Pos += len(ids)
	for _, p := range positions {
		s.RopeNext = max(s.RopeNext, p[0]+1, p[1]+1, p[2]+1)
	}
	return Head(w, x), hidden
}

// Embed is the embedding rows of ids.
func Embed(table *model.Matrix, ids []int) [][]float64 {
	x := make([][]float64, len(ids))
	row := make([]float32, table.In)
	for t, id := range ids {
		table.Row(id, row)
		x[t] = Float64(row)
	}
	return x
}

// DecoderLayer is layer i: h = x + Mixer(norm_in(x)); x = h + MoE(norm_post(h)).
func DecoderLayer(w *model.Weights, i int, st *LayerState, x [][]float64, positions [][3]int) [][]float64 {
	c, l := &w.Config, &w.Layers[i]
	eps := float64(c.RMSNormEps)
	var mixed [][]float64
	if l.DeltaNet != nil {
		mixed = GatedDeltaNet(c, l.DeltaNet, st, RMSNormRows(x, l.InputNorm, eps))
	} else {
		mixed = AttentionAt(c, l.Attention, st, RMSNormRows(x, l.InputNorm, eps), positions)
	}
	h := Add(x, mixed)
	return Add(h, SparseMoE(c, &l.MoE, RMSNormRows(h, l.PostNorm, eps)))
}

// Head is the final norm, then the untied lm_head.
func Head(w *model.Weights, x [][]float64) [][]float64 {
	return LinearRows(&w.LMHead, RMSNormRows(x, w.FinalNorm, float64(w.Config.RMSNormEps)))
}

// RMSNormRows is RMSNorm of each row.
func RMSNormRows(x [][]float64, w []float32, eps float64) [][]float64 {
	out := make([][]float64, len(x))
	for t, r := range x {
		out[t] = RMSNorm(r, w, eps)
	}
	return out
}

// Add is x + y, row by row.
func Add(x, y [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for t := range x {
		out[t] = make([]float64, len(x[t]))
		for i := range x[t] {
			out[t][i] = x[t][i] + y[t][i]
		}
	}
	return out
}

// Conv is the causal depthwise convolution with SiLU over the rows x,
// continuing from the K−1 rows in *state, which it replaces with the last
// K−1 rows it saw: c[t,ch] = silu(Σ_j conv[ch,j]·x[t−K+1+j, ch]).
func Conv(conv [][]float32, state *[][]float64, x [][]float64) [][]float64 {
	seen := append(slices.Clone(*state), x...)
	out := make([][]float64, len(x))
	for t := range x {
		out[t] = make([]float64, len(conv))
		for ch, taps := range conv {
			var acc float64
			for j, w := range taps {
				acc += float64(w) * seen[t+j][ch]
			}
			out[t][ch] = SiLU(acc)
		}
	}
	*state = seen[len(seen)-len(*state):]
	return out
}

// GatedDeltaNet is the linear-attention mixer over the rows x, advancing
// st's conv rows and recurrent state: per value head the delta rule, then
// the gated output norm, then the output projection.
func GatedDeltaNet(c *model.Config, w *model.DeltaNet, st *LayerState, x [][]float64) [][]float64 {
	qkv := Conv(w.Conv, &st.Conv, LinearRows(&w.QKV, x))
	z, a, b := LinearRows(&w.Z, x), LinearRows(&w.A, x), LinearRows(&w.B, x)
	Dv := c.LinearValueHeadDim
	o := make([][]float64, len(x))
	for t := range x {
		for j := range c.LinearValueHeads {
			oj := DeltaNetHead(c, w, st.S[j], j, qkv[t], a[t][j], b[t][j])
			o[t] = append(o[t], GatedRMSNorm(oj, z[t][j*Dv:(j+1)*Dv], w.Norm, float64(c.DeltaNetNormEps))...)
		}
	}
	return LinearRows(&w.Out, o)
}

// DeltaNetHead is value head j of one token, given the conv output qkv
// and the head's a and b: q and k of key head j/(Hv/Hk) L2-normalised (q
// also by 1/sqrt(Dk)), the gates, and the delta rule on the head's state
// S, which it advances. It returns the head's output before the norm.
func DeltaNetHead(c *model.Config, w *model.DeltaNet, S []float64, j int, qkv []float64, a, b float64) []float64 {
	Hk, Dk, Dv := c.LinearKeyHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	kh := j / (c.LinearValueHeads / Hk)
	q := L2Normalize(qkv[kh*Dk:(kh+1)*Dk], c.DeltaNetL2Eps, 1/math.Sqrt(float64(Dk)))
	k := L2Normalize(qkv[(Hk+kh)*Dk:(Hk+kh+1)*Dk], c.DeltaNetL2Eps, 1)
	v := qkv[2*Hk*Dk+j*Dv : 2*Hk*Dk+(j+1)*Dv]
	decay, beta := DeltaNetGates(a, b, float64(w.ALog[j]), float64(w.DtBias[j]))
	return DeltaRule(S, k, q, v, decay, beta)
}

// GatedRMSNorm is DeltaNet's output norm: RMSNorm(o, w)·silu(z), with the
// plain multiplier w.
func GatedRMSNorm(o, z []float64, w []float32, eps float64) []float64 {
	out := RMSNorm(o, w, eps)
	for d := range out {
		out[d] *= SiLU(z[d])
	}
	return out
}

// RoPE rotates the first RotaryDim dims of a head vector at position pos.
func RoPE(c *model.Config, x []float64, pos int) []float64 {
	return Rotate(x, RopeAngles(pos, c.RotaryDim, c.RopeTheta))
}

// MRoPE rotates the first RotaryDim dims of a head vector at the M-RoPE
// position pos: frequency i turns by the position on axis c.RopeAxis(i).
func MRoPE(c *model.Config, x []float64, pos [3]int) []float64 {
	angles := make([]float64, c.RotaryDim/2)
	for i := range angles {
		angles[i] = RopeAngles(pos[c.RopeAxis(i)], c.RotaryDim, c.RopeTheta)[i]
	}
	return Rotate(x, angles)
}

// Attention is the gated full-attention mixer over the rows x: it appends
// their keys and values to st's cache and attends causally, query head h
// reading kv head h/(H/KV); each row turns by its M-RoPE position.
func Attention(c *model.Config, w *model.Attention, st *LayerState, x [][]float64) [][]float64 {
	positions := make([][3]int, len(x))
	for t := range x {
		positions[t] = model.TextPosition(len(st.Keys[0]) + t)
	}
	return AttentionAt(c, w, st, x, positions)
}

// AttentionAt is Attention with each row's M-RoPE position given.
func AttentionAt(c *model.Config, w *model.Attention, st *LayerState, x [][]float64, positions [][3]int) [][]float64 {
	H, KV, D := c.NumHeads, c.NumKVHeads, c.HeadDim
	eps := float64(c.RMSNormEps)
	qg, k, v := LinearRows(&w.Q, x), LinearRows(&w.K, x), LinearRows(&w.V, x)
	pos0 := len(st.Keys[0])
	for t := range x {
		for h := range KV {
			st.Keys[h] = append(st.Keys[h], MRoPE(c, RMSNorm(k[t][h*D:(h+1)*D], w.KNorm, eps), positions[t]))
			st.Values[h] = append(st.Values[h], v[t][h*D:(h+1)*D])
		}
	}
	o := make([][]float64, len(x))
	for t := range x {
		seen := pos0 + t + 1
		for h := range H {
			q := MRoPE(c, RMSNorm(qg[t][2*h*D:(2*h+1)*D], w.QNorm, eps), positions[t])
			kv := h / (H / KV)
			o[t] = append(o[t], GatedAttention(q, st.Keys[kv][:seen], st.Values[kv][:seen], qg[t][(2*h+1)*D:(2*h+2)*D])...)
		}
	}
	return LinearRows(&w.O, o)
}

// Route is the router of one row, given its router logits: softmax over
// all experts, the k most probable (the lower index first on ties), their
// probabilities renormalised to sum 1.
func Route(logits []float64, k int) (experts []int, weights []float64) {
	p := Softmax(logits)
	order := make([]int, len(p))
	for e := range order {
		order[e] = e
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(p[b], p[a]) })
	experts = order[:k]
	var sum float64
	for _, e := range experts {
		sum += p[e]
	}
	for _, e := range experts {
		weights = append(weights, p[e]/sum)
	}
	return experts, weights
}

// Expert is one SwiGLU expert over the rows x: down(silu(gate·x) ⊙ up·x).
func Expert(gate, up, down *model.Matrix, x [][]float64) [][]float64 {
	g, u := LinearRows(gate, x), LinearRows(up, x)
	for t := range g {
		for i := range g[t] {
			g[t][i] = SiLU(g[t][i]) * u[t][i]
		}
	}
	return LinearRows(down, g)
}

// SparseMoE is the mixture of experts over the rows x: each row's shared
// expert scaled by its sigmoid gate, plus each expert the router chose for
// it scaled by its weight. The rows an expert was chosen for go through it
// together.
func SparseMoE(c *model.Config, w *model.MoE, x [][]float64) [][]float64 {
	y := Expert(&w.SharedGate, &w.SharedUp, &w.SharedDown, x)
	gate, logits := LinearRows(&w.SharedExpert, x), LinearRows(&w.Router, x)
	rows := make([][]int, c.NumExperts)        // the rows routed to each expert
	weights := make([][]float64, c.NumExperts) // and their weights
	for t := range x {
		for d := range y[t] {
			y[t][d] *= Sigmoid(gate[t][0])
		}
		experts, ws := Route(logits[t], c.ExpertsPerToken)
		for i, e := range experts {
			rows[e], weights[e] = append(rows[e], t), append(weights[e], ws[i])
		}
	}
	for e, ts := range rows {
		if len(ts) == 0 {
			continue
		}
		in := make([][]float64, len(ts))
		for i, t := range ts {
			in[i] = x[t]
		}
		for i, ye := range Expert(&w.Gate[e], &w.Up[e], &w.Down[e], in) {
			for d, v := range ye {
				y[ts[i]][d] += weights[e][i] * v
			}
		}
	}
	return y
}
