package bench

import (
	"errors"
	"math"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
)

// The layer mix of Qwen3.6-35B-A3B (engine/model/MODEL.md: 40 layers,
// [linear_attention ×3, full_attention] ×10), which projections target.
const (
	TargetDeltaNetLayers  = 30
	TargetAttentionLayers = 10
)

// LayerCosts splits a measured time into a fixed part and the cost of one
// layer of each kind, and projects the full model. Times are milliseconds
// per token for decode and per prompt for prefill.
type LayerCosts struct {
	// Method is "blocks" (each block timed as it ran) or "prefixes" (the
	// first n layers timed end to end for several n, then fitted).
	Method string `json:"method"`
	// FixedMs: embedding, head, sampling, norms between blocks, submission.
	FixedMs float64 `json:"fixed_ms"`
	// DeltaNetLayerMs and AttentionLayerMs include the layer's MoE.
	DeltaNetLayerMs  float64 `json:"deltanet_layer_ms"`
	AttentionLayerMs float64 `json:"attention_layer_ms"`
	// MoEMs is the MoE's share of each layer (blocks method only).
	MoEMs float64 `json:"moe_ms,omitempty"`
	// HeadMs is the language-model head (blocks method only).
	HeadMs float64 `json:"head_ms,omitempty"`
	// Projected40Ms = FixedMs + 30·DeltaNetLayerMs + 10·AttentionLayerMs.
	Projected40Ms float64 `json:"projected_40_layers_ms"`
	// ProjectedTokPerSec is the projected rate: tokens / Projected40Ms.
	ProjectedTokPerSec float64 `json:"projected_40_layers_tok_per_s"`
}

func (c *LayerCosts) project(tokens int) {
	c.Projected40Ms = c.FixedMs + TargetDeltaNetLayers*c.DeltaNetLayerMs + TargetAttentionLayers*c.AttentionLayerMs
	if c.Projected40Ms > 0 {
		c.ProjectedTokPerSec = float64(tokens) / (c.Projected40Ms / 1e3)
	}
}

// BlockTimes adds up, over the passes it times, the wall time of each kind
// of block. It is only meaningful for a backend whose blocks do their work
// when called (cpu); a recording backend's blocks return at once.
type BlockTimes struct {
	DeltaNet, Attention, MoE, Head, Total time.Duration
}

// Costs turns the times into per-layer costs per unit of work: units is the
// number of prompts (prefill, however many chunks each took) or of decode
// steps timed, tokens the tokens of one unit, and deltaNetLayers and
// attentionLayers the layers of each kind one pass runs.
func (b *BlockTimes) Costs(units, tokens, deltaNetLayers, attentionLayers int) LayerCosts {
	ms := func(d time.Duration, n int) float64 {
		if n == 0 {
			return 0
		}
		return d.Seconds() * 1e3 / float64(n)
	}
	moe := ms(b.MoE, units*(deltaNetLayers+attentionLayers))
	c := LayerCosts{
		Method:  "blocks",
		MoEMs:   moe,
		HeadMs:  ms(b.Head, units),
		FixedMs: ms(b.Total-b.DeltaNet-b.Attention-b.MoE, units),
	}
	if deltaNetLayers > 0 {
		c.DeltaNetLayerMs = ms(b.DeltaNet, units*deltaNetLayers) + moe
	}
	if attentionLayers > 0 {
		c.AttentionLayerMs = ms(b.Attention, units*attentionLayers) + moe
	}
	c.project(tokens)
	return c
}

// timedPass wraps a model.Pass and adds each block's wall time to t.
type timedPass struct {
	model.Pass
	t *BlockTimes
}

func (p timedPass) DeltaNet(layer int, w *model.DeltaNet, x model.Activation) model.Activation {
	defer since(&p.t.DeltaNet, time.Now())
	return p.Pass.DeltaNet(layer, w, x)
}

func (p timedPass) Attention(layer int, w *model.Attention, x model.Activation) model.Activation {
	defer since(&p.t.Attention, time.Now())
	return p.Pass.Attention(layer, w, x)
}

func (p timedPass) MoE(layer int, w *model.MoE, x model.Activation) model.Activation {
	defer since(&p.t.MoE, time.Now())
	return p.Pass.MoE(layer, w, x)
}

func (p timedPass) Head(x model.Activation, w *model.Matrix) model.Activation {
	defer since(&p.t.Head, time.Now())
	return p.Pass.Head(x, w)
}

func since(d *time.Duration, start time.Time) { *d += time.Since(start) }

// PrefixTime is the measured time of a pass through the first layers of
// the model: DeltaNet and Attention count the layers of each kind it ran.
type PrefixTime struct {
	DeltaNet, Attention int
	Ms                  float64
}

// FitPrefixes finds fixed, DeltaNet-layer and attention-layer costs that
// best explain the prefix times (least squares over
// Ms = fixed + DeltaNet·dn + Attention·att). A kind of layer absent from
// every prefix gets cost 0. At least as many distinct prefixes as unknowns
// are needed.
func FitPrefixes(ts []PrefixTime, tokens int) (LayerCosts, error) {
	haveDN, haveAtt := false, false
	for _, t := range ts {
		haveDN = haveDN || t.DeltaNet > 0
		haveAtt = haveAtt || t.Attention > 0
	}
	// Columns: fixed, then the kinds present.
	row := func(t PrefixTime) []float64 {
		r := []float64{1}
		if haveDN {
			r = append(r, float64(t.DeltaNet))
		}
		if haveAtt {
			r = append(r, float64(t.Attention))
		}
		return r
	}
	n := 1
	if haveDN {
		n++
	}
	if haveAtt {
		n++
	}
	// Normal equations AᵀA x = Aᵀb.
	ata := make([][]float64, n)
	for i := range ata {
		ata[i] = make([]float64, n+1)
	}
	for _, t := range ts {
		r := row(t)
		for i := range n {
			for j := range n {
				ata[i][j] += r[i] * r[j]
			}
			ata[i][n] += r[i] * t.Ms
		}
	}
	x, err := solve(ata)
	if err != nil {
		return LayerCosts{}, errors.New("bench: the prefix timings cannot separate the layer kinds (too few distinct prefixes)")
	}
	c := LayerCosts{Method: "prefixes", FixedMs: x[0]}
	k := 1
	if haveDN {
		c.DeltaNetLayerMs = x[k]
		k++
	}
	if haveAtt {
		c.AttentionLayerMs = x[k]
	}
	c.project(tokens)
	return c, nil
}

// solve runs Gaussian elimination with partial pivoting on the augmented
// matrix m (n rows, n+1 columns).
func solve(m [][]float64) ([]float64, error) {
	n := len(m)
	for col := range n {
		p := col
		for r := col + 1; r < n; r++ {
			if math.Abs(m[r][col]) > math.Abs(m[p][col]) {
				p = r
			}
		}
		if math.Abs(m[p][col]) < 1e-12 {
			return nil, errors.New("singular")
		}
		m[col], m[p] = m[p], m[col]
		for r := range n {
			if r == col {
				continue
			}
			f := m[r][col] / m[col][col]
			for c := col; c <= n; c++ {
				m[r][c] -= f * m[col][c]
			}
		}
	}
	x := make([]float64, n)
	for i := range n {
		x[i] = m[i][n] / m[i][i]
	}
	return x, nil
}
