package gpu

import (
	"bytes"
	"encoding/binary"
	"testing"
)

func TestEmbed(t *testing.T) {
	rng := testRand(t)
	for _, format := range []string{"f32", "f16", "bf16", "q4", "q8"} {
		t.Run(format, func(t *testing.T) {
			vocab, hidden := 50, 320
			m := randMatrix(rng, format, vocab, hidden, 64)
			ids := []int32{3, 49, 0, 17, 3}
			idb := make([]byte, 4*len(ids))
			for i, id := range ids {
				binary.LittleEndian.PutUint32(idb[4*i:], uint32(id))
			}
			const pos0 = 3
			got := twice(t, func(r *kernelRig) [][]byte {
				dm := r.devMatrixOf(m)
				out := actAt(r.zeros(4*len(ids)*hidden), len(ids), hidden)
				history := r.zeros(4 * (pos0 + len(ids)))
				r.run(func(e *encoder) { e.embed(dm, r.buf(idb), out, history, pos0) })
				return [][]byte{f32Bytes(r.floatsAt(out.loc, len(ids)*hidden)), history.buf.Bytes()}
			})
			out := floats(got[0])
			if !bytes.Equal(got[1][4*pos0:], idb) {
				t.Fatalf("history after the gather: % x, want the ids % x at position %d", got[1], idb, pos0)
			}
			// Dequantization is one multiply-add in f32 on both sides: exact.
			for i, id := range ids {
				for j := 0; j < hidden; j++ {
					if want := m.At(int(id), j); out[i*hidden+j] != want {
						t.Fatalf("token %d (id %d) element %d: got %v, want %v", i, id, j, out[i*hidden+j], want)
					}
				}
			}
		})
	}
}

// TestEmbedSteps gathers the decode steps of 11 sequences (two dispatches
// of at most 8), each id read from its own buffer and appended to its own
// history at its own position, and demands the bits of embed run for each
// id alone (which TestEmbed checks against the table): exact, since both
// are the same single dequantization.
func TestEmbedSteps(t *testing.T) {
	rng := testRand(t)
	const n, vocab, hidden = 11, 50, 320
	for _, format := range []string{"bf16", "q4"} {
		t.Run(format, func(t *testing.T) {
			m := randMatrix(rng, format, vocab, hidden, 64)
			ids := make([]int32, n)
			pos := make([]int, n)
			for z := range ids {
				ids[z], pos[z] = int32(rng.IntN(vocab)), rng.IntN(20)
			}
			id := func(z int) []byte { return binary.LittleEndian.AppendUint32(nil, uint32(ids[z])) }
			got := twice(t, func(r *kernelRig) [][]byte {
				var out [][]byte
				for _, together := range []bool{true, false} {
					dm := r.devMatrixOf(m)
					x := actAt(r.zeros(4*n*hidden), n, hidden)
					idLocs, histories := make([]loc, n), make([]loc, n)
					for z := range n {
						// Each id at the end of a ring of 4, as a sampler slot.
						ring := r.zeros(16)
						copy(ring.buf.Bytes()[12:], id(z))
						idLocs[z] = loc{ring.buf, 12}
						histories[z] = r.zeros(4 * (pos[z] + 1))
					}
					r.run(func(e *encoder) {
						if together {
							at := make([]loc, n)
							for z := range n {
								at[z] = loc{histories[z].buf, 4 * pos[z]}
							}
							e.embedSteps(dm, idLocs, x, at)
							return
						}
						for z := range n {
							e.embed(dm, idLocs[z], x.row(z), histories[z], pos[z])
						}
					})
					out = append(out, f32Bytes(r.floatsAt(x.loc, n*hidden)))
					for z := range n {
						out = append(out, histories[z].buf.Bytes()[:4*(pos[z]+1)])
					}
				}
				return out
			})
			sameTogetherAlone(t, got, "")
			for z := range n {
				if h := got[1+z]; !bytes.Equal(h[4*pos[z]:], id(z)) || !bytes.Equal(h[:4*pos[z]], make([]byte, 4*pos[z])) {
					t.Fatalf("sequence %d: history % x, want id %d at position %d only", z, h, ids[z], pos[z])
				}
				x := floats(got[0])[z*hidden : (z+1)*hidden]
				for j := range hidden {
					if want := m.At(int(ids[z]), j); x[j] != want {
						t.Fatalf("sequence %d (id %d) element %d: got %v, want %v", z, ids[z], j, x[j], want)
					}
				}
			}
		})
	}
}

func TestCopy(t *testing.T) {
	rng := testRand(t)
	const n = 1000 // not a multiple of the 256-thread groups
	src := randFloats(rng, n, 1)
	got := twice(t, func(r *kernelRig) [][]byte {
		dst := r.zeros(4 * (n + 1))
		r.run(func(e *encoder) { e.copyF32(r.buf(f32Bytes(src)), dst, n) })
		return [][]byte{dst.buf.Bytes()}
	})
	// A copy is exact, and the element past the end stays untouched.
	if !bytes.Equal(got[0][:4*n], f32Bytes(src)) || !bytes.Equal(got[0][4*n:], make([]byte, 4)) {
		t.Fatal("copy_f32 did not copy exactly n floats")
	}
}
