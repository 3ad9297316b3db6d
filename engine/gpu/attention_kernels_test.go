package gpu

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/suzuran-app/suzuran/engine/internal/reference"
	"github.com/suzuran-app/suzuran/engine/safetensors"
)

func bf16Round(v float64) float64 {
	return float64(safetensors.BF16ToFloat32(safetensors.Float32ToBF16(float32(v))))
}

// kernelAngles are the rotation angles at pos as the kernel forms them
// from its inverse frequencies: an f32 product, like transformers' rotary
// embedding.
func kernelAngles(invFreq []float32, pos int) []float64 {
	angles := make([]float64, len(invFreq))
	for i := range angles {
		angles[i] = float64(float32(pos) * invFreq[i])
	}
	return angles
}

func TestAttention(t *testing.T) {
	rng := testRand(t)
	cases := []attnShape{
		{headDim: 64, rotaryDim: 16, qHeads: 4, kvHeads: 2, pos0: 0, maxSeq: 300, rows: 5, eps: 1e-6},
		{headDim: 96, rotaryDim: 24, qHeads: 6, kvHeads: 2, pos0: 270, maxSeq: 300, rows: 1, eps: 1e-6},  // two key chunks
		{headDim: 256, rotaryDim: 64, qHeads: 2, kvHeads: 1, pos0: 250, maxSeq: 270, rows: 9, eps: 1e-6}, // chunk edge inside the pass
		{headDim: 32, rotaryDim: 16, qHeads: 6, kvHeads: 2, pos0: 40, maxSeq: 200, rows: 70, eps: 1e-6},  // several key tiles and query blocks
	}
	var all []attnShape
	for _, s := range cases {
		all = append(all, s)
		s.kvF32 = true
		all = append(all, s)
	}
	for _, s := range all {
		t.Run(fmt.Sprintf("d%d_pos%d_rows%d_kv%s", s.headDim, s.pos0, s.rows, s.kvName()), func(t *testing.T) {
			in := newAttnInputs(rng, s)
			d, qg, k, v, qn, kn, inv, k0, v0 := s.headDim, in.qg, in.k, in.v, in.qn, in.kn, in.inv, in.k0, in.v0
			decode := in.decode
			got := twice(t, func(r *kernelRig) [][]byte {
				kc, vc := r.buf(k0), r.buf(v0)
				q := r.zeros(4 * s.rows * s.qHeads * d)
				parts := s.rows * s.qHeads * s.splits()
				pO, pM, pL := r.zeros(4*parts*d), r.zeros(4*parts), r.zeros(4*parts)
				o := r.zeros(4 * s.rows * s.qHeads * d)
				o2 := r.zeros(4 * s.rows * s.qHeads * d)
				b := attnBufs{qg: r.buf(f32Bytes(qg)), k: r.buf(f32Bytes(k)), v: r.buf(f32Bytes(v)),
					qNorm: r.buf(f32Bytes(qn)), kNorm: r.buf(f32Bytes(kn)), invFreq: r.buf(f32Bytes(inv)),
					kCache: kc, vCache: vc, q: q, partO: pO, partM: pM, partL: pL, o: o}
				prefill := b
				prefill.o = o2
				r.run(func(e *encoder) {
					e.attnQNormRope(s, b)
					e.attnKVWrite(s, b)
					e.attnSplit(s, b)
					e.attnReduceGate(s, b)
					e.attnPrefill(s, prefill)
				})
				return [][]byte{f32Bytes(r.floatsAt(q, s.rows*s.qHeads*d)), append([]byte(nil), kc.buf.Bytes()...),
					append([]byte(nil), vc.buf.Bytes()...), f32Bytes(r.floatsAt(o, s.rows*s.qHeads*d)),
					f32Bytes(r.floatsAt(o2, s.rows*s.qHeads*d))}
			})
			// Reference: q and the new keys, the cache after the pass, attention.
			wantQ, kcache, vcache := in.want()
			// q: normalise and rotate in f32: 1e-5 relative, floor 1e-2.
			checkClose(t, "q", floats(got[0]), wantQ, 1e-5, 1e-2)
			// Cache: the kernel rounds its f32 result to the cache type; a
			// value near a rounding boundary may land one bf16 step (2^-8
			// relative) away, or differ by f32 rounding (1e-5 relative).
			gotK, gotV := got[1], got[2]
			ktol := 1.0 / 128
			if s.kvF32 {
				ktol = 1e-5
			}
			for i := range kcache {
				gk, gv := decode(gotK, i), decode(gotV, i)
				if math.Abs(gk-kcache[i]) > math.Abs(kcache[i])*ktol+1e-6 || gv != vcache[i] {
					t.Fatalf("cache element %d: k %v v %v, want %v %v", i, gk, gv, kcache[i], vcache[i])
				}
				kcache[i] = gk // attend over what the kernel stored
			}
			wantO := in.wantO(floats(got[0]), kcache, vcache)
			// Softmax-weighted means of O(1) values over up to 280 keys in
			// f32: 1e-4 absolute (floor 1) covers the exp and sum rounding.
			checkClose(t, "attention o (split + reduce)", floats(got[3]), wantO, 1e-4, 1)
			checkClose(t, "attention o (tiled prefill)", floats(got[4]), wantO, 1e-4, 1)
		})
	}
}

// attnInputs are a TestAttention case's random inputs: the projections,
// norm weights and inverse frequencies, and the cache before the pass in
// the cache's type (k0, v0), with that type's decode and rounding.
type attnInputs struct {
	s                     attnShape
	qg, k, v, qn, kn, inv []float32
	k0, v0                []byte
	cacheLen              int // elements of each cache
	decode                func(b []byte, i int) float64
	round                 func(v float64) float64
}

func newAttnInputs(rng *rand.Rand, s attnShape) *attnInputs {
	d := s.headDim
	in := &attnInputs{s: s}
	in.qg = randFloats(rng, s.rows*s.qHeads*2*d, 2)
	in.k = randFloats(rng, s.rows*s.kvHeads*d, 2)
	in.v = randFloats(rng, s.rows*s.kvHeads*d, 2)
	in.qn = randFloats(rng, d, 1)
	in.kn = randFloats(rng, d, 1)
	in.inv = make([]float32, s.rotaryDim/2)
	for i := range in.inv {
		in.inv[i] = float32(math.Pow(1e7, -float64(2*i)/float64(s.rotaryDim)))
	}
	// The cache before the pass: random rows.
	cacheLen := s.kvHeads * s.maxSeq * d
	encode := bf16s
	in.decode = func(b []byte, i int) float64 {
		return float64(safetensors.BF16ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
	}
	in.round = bf16Round
	if s.kvF32 {
		encode, in.decode = f32Bytes, func(b []byte, i int) float64 {
			return float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		in.round = func(v float64) float64 { return float64(float32(v)) }
	}
	in.k0 = encode(randFloats(rng, cacheLen, 1))
	in.v0 = encode(randFloats(rng, cacheLen, 1))
	in.cacheLen = cacheLen
	return in
}

// want is the float64 reference of the pass's normalised, rotated queries
// and of the caches after it.
func (in *attnInputs) want() (wantQ, kcache, vcache []float64) {
	s, d := in.s, in.s.headDim
	wantQ = make([]float64, s.rows*s.qHeads*d)
	kcache = make([]float64, in.cacheLen)
	vcache = make([]float64, in.cacheLen)
	for i := range kcache {
		kcache[i] = in.decode(in.k0, i)
		vcache[i] = in.decode(in.v0, i)
	}
	for tt := 0; tt < s.rows; tt++ {
		pos := s.pos0 + tt
		for h := 0; h < s.qHeads; h++ {
			src := in.qg[(tt*s.qHeads+h)*2*d:][:d]
			copy(wantQ[(tt*s.qHeads+h)*d:], reference.Rotate(reference.RMSNorm(reference.Float64(src), in.qn, float64(s.eps)), kernelAngles(in.inv, pos)))
		}
		for h := 0; h < s.kvHeads; h++ {
			kr := reference.Rotate(reference.RMSNorm(reference.Float64(in.k[(tt*s.kvHeads+h)*d:][:d]), in.kn, float64(s.eps)), kernelAngles(in.inv, pos))
			for j := 0; j < d; j++ {
				kcache[(h*s.maxSeq+pos)*d+j] = in.round(kr[j])
				vcache[(h*s.maxSeq+pos)*d+j] = in.round(float64(in.v[(tt*s.kvHeads+h)*d+j]))
			}
		}
	}
	return wantQ, kcache, vcache
}

// wantO is the float64 reference of the gated attention output from the
// kernel's queries gotQ over the caches.
func (in *attnInputs) wantO(gotQ []float32, kcache, vcache []float64) []float64 {
	s, d := in.s, in.s.headDim
	wantO := make([]float64, s.rows*s.qHeads*d)
	for tt := 0; tt < s.rows; tt++ {
		last := s.pos0 + tt
		for h := 0; h < s.qHeads; h++ {
			kvh := h / (s.qHeads / s.kvHeads)
			var keys, values [][]float64
			for key := 0; key <= last; key++ {
				keys = append(keys, kcache[(kvh*s.maxSeq+key)*d:][:d])
				values = append(values, vcache[(kvh*s.maxSeq+key)*d:][:d])
			}
			q := reference.Float64(gotQ[(tt*s.qHeads+h)*d:][:d])
			gate := reference.Float64(in.qg[(tt*s.qHeads+h)*2*d+d:][:d])
			copy(wantO[(tt*s.qHeads+h)*d:], reference.GatedAttention(q, keys, values, gate))
		}
	}
	return wantO
}

// randStepCaches are n sequences' positions, capacities and random caches
// (keys, values) of elem-byte elements for TestAttentionSteps.
func randStepCaches(rng *rand.Rand, n, elem, rowFloats int) (pos, maxSeq []int, caches [][2][]byte) {
	pos = make([]int, n)
	maxSeq = make([]int, n)
	caches = make([][2][]byte, n)
	for z := range n {
		pos[z] = rng.IntN(600)
		maxSeq[z] = pos[z] + 1 + rng.IntN(50)
		for kv := range 2 {
			vals := randFloats(rng, rowFloats*maxSeq[z], 1)
			if elem == 4 {
				caches[z][kv] = f32Bytes(vals)
			} else {
				caches[z][kv] = bf16s(vals)
			}
		}
	}
	return pos, maxSeq, caches
}

// TestAttentionSteps runs the attention kernels that serve several
// sequences' decode steps in one dispatch — each row at its own position
// in its own cache of its own capacity, some past one key chunk — and
// demands the bits of each sequence's step run alone through the
// one-sequence kernels (which TestAttention checks against the float64
// reference): outputs and caches. 10 sequences take two dispatches of at
// most 8.
func TestAttentionSteps(t *testing.T) {
	rng := testRand(t)
	const headDim, rot, qHeads, kvHeads = 40, 16, 4, 2
	for _, kvF32 := range []bool{false, true} {
		for _, n := range []int{3, 10} {
			t.Run(fmt.Sprintf("kvf32_%v_seqs%d", kvF32, n), func(t *testing.T) {
				elem := 2
				if kvF32 {
					elem = 4
				}
				pos, maxSeq, caches := randStepCaches(rng, n, elem, kvHeads*headDim)
				qg := randFloats(rng, n*qHeads*2*headDim, 1)
				k := randFloats(rng, n*kvHeads*headDim, 1)
				v := randFloats(rng, n*kvHeads*headDim, 1)
				qNorm, kNorm := randFloats(rng, headDim, 1), randFloats(rng, headDim, 1)
				inv := make([]float32, rot/2)
				for i := range inv {
					inv[i] = float32(math.Pow(1e4, -float64(2*i)/rot))
				}
				base := attnShape{headDim: headDim, rotaryDim: rot, qHeads: qHeads, kvHeads: kvHeads, eps: 1e-6, kvF32: kvF32}
				got := twice(t, func(r *kernelRig) [][]byte {
					var out [][]byte
					for _, together := range []bool{true, false} {
						seqs := make([]kvSeq, n)
						for z := range n {
							seqs[z] = kvSeq{k: r.buf(caches[z][0]), v: r.buf(caches[z][1]), pos: pos[z], maxSeq: maxSeq[z]}
						}
						b := attnBufs{qg: r.buf(f32Bytes(qg)), k: r.buf(f32Bytes(k)), v: r.buf(f32Bytes(v)),
							qNorm: r.buf(f32Bytes(qNorm)), kNorm: r.buf(f32Bytes(kNorm)), invFreq: r.buf(f32Bytes(inv)),
							q: r.zeros(4 * n * qHeads * headDim), o: r.zeros(4 * n * qHeads * headDim)}
						if together {
							s := base
							for _, q := range seqs {
								s.keys = max(s.keys, q.pos+1)
							}
							parts := n * qHeads * s.splits()
							b.partO, b.partM, b.partL = r.zeros(4*parts*headDim), r.zeros(4*parts), r.zeros(4*parts)
							info := r.buf(attnStepInfo(seqs))
							r.run(func(e *encoder) {
								e.attnStepsNormRope(base, b, seqs, info)
								e.attnStepsSplit(base, b, seqs, info)
								e.attnStepsReduce(base, b, seqs, info)
							})
						} else {
							for z := range n {
								s := base
								s.pos0, s.maxSeq, s.rows = pos[z], maxSeq[z], 1
								at := func(l loc, floats int) loc { return loc{l.buf, l.off + 4*z*floats} }
								bz := b
								bz.qg, bz.q, bz.o = at(b.qg, qHeads*2*headDim), at(b.q, qHeads*headDim), at(b.o, qHeads*headDim)
								bz.k, bz.v = at(b.k, kvHeads*headDim), at(b.v, kvHeads*headDim)
								bz.kCache, bz.vCache = seqs[z].k, seqs[z].v
								parts := qHeads * s.splits()
								bz.partO, bz.partM, bz.partL = r.zeros(4*parts*headDim), r.zeros(4*parts), r.zeros(4*parts)
								r.run(func(e *encoder) {
									e.attnQNormRope(s, bz)
									e.attnKVWrite(s, bz)
									e.attnSplit(s, bz)
									e.attnReduceGate(s, bz)
								})
							}
						}
						out = append(out, f32Bytes(r.floatsAt(b.o, n*qHeads*headDim)))
						for z := range n {
							out = append(out, append([]byte(nil), seqs[z].k.buf.Bytes()...), append([]byte(nil), seqs[z].v.buf.Bytes()...))
						}
					}
					return out
				})
				sameTogetherAlone(t, got, " (0: attention output, then each sequence's keys and values)")
				// The caches changed only at each sequence's new position.
				for z := range n {
					row := elem * headDim
					for kv := range 2 {
						c := got[1+2*z+kv]
						for h := range kvHeads {
							for p := range maxSeq[z] {
								off := (h*maxSeq[z] + p) * row
								if changed := !bytes.Equal(c[off:off+row], caches[z][kv][off:off+row]); changed != (p == pos[z]) {
									t.Fatalf("sequence %d cache %d head %d row %d: changed %v, only row %d should", z, kv, h, p, changed, pos[z])
								}
							}
						}
					}
				}
			})
		}
	}
}
