package host

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/ebitengine/purego"
)

// One build of testdata/ per test binary; the compiled objects are cached
// across runs by content hash.
var (
	testLibOnce sync.Once
	testLibVal  *Library
	testLibErr  error
)

func testSources(t testing.TB) map[string]string {
	t.Helper()
	files, err := filepath.Glob("testdata/*")
	if err != nil {
		t.Fatal(err)
	}
	src := map[string]string{}
	for _, f := range files {
		if strings.HasSuffix(f, ".metal") || strings.HasSuffix(f, ".h") {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			src[filepath.Base(f)] = string(b)
		}
	}
	return src
}

func testLib(t testing.TB) *Library {
	t.Helper()
	testLibOnce.Do(func() {
		testLibVal, testLibErr = Compile(testSources(t), Options{PathPrefix: "testdata/", Threads: 2})
	})
	if testLibErr != nil {
		t.Fatal(testLibErr)
	}
	return testLibVal
}

func kernel(t testing.TB, name string) *Kernel {
	t.Helper()
	k, err := testLib(t).Kernel(name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func alloc(t testing.TB, n int) []byte {
	t.Helper()
	m, err := Alloc(n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Free() })
	return m.Bytes()
}

func f32s(b []byte) []float32 {
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func u32s(b []byte) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func params(vals ...any) []byte {
	var buf bytes.Buffer
	for _, v := range vals {
		binary.Write(&buf, binary.LittleEndian, v)
	}
	return buf.Bytes()
}

func dispatch(t testing.TB, k *Kernel, groups, threads Size3, args []Arg, seed uint64) {
	t.Helper()
	if err := k.Dispatch(groups, threads, args, seed); err != nil {
		t.Fatal(err)
	}
}

func TestDescLayout(t *testing.T) {
	var d desc
	// Offsets of emu::Desc in shim/emu_runtime.h (static_asserts there).
	want := map[string][2]uintptr{
		"groups":   {unsafe.Offsetof(d.groups), 8},
		"threads":  {unsafe.Offsetof(d.threads), 20},
		"seed":     {unsafe.Offsetof(d.seed), 32},
		"buf":      {unsafe.Offsetof(d.buf), 40},
		"tglen":    {unsafe.Offsetof(d.tglen), 288},
		"nthreads": {unsafe.Offsetof(d.nthreads), 412},
		"err":      {unsafe.Offsetof(d.err), 416},
		"bufLen":   {unsafe.Offsetof(d.bufLen), 1440},
	}
	for f, o := range want {
		if o[0] != o[1] {
			t.Errorf("desc.%s at %d, C++ has %d", f, o[0], o[1])
		}
	}
}

// Constant parameters by reference, a #define'd buffer index, a ragged
// grid tail. The kernel computes a·scale + b in single precision, as Go
// does with explicit float32 rounding, so the results must be identical.
func TestAddConstantParams(t *testing.T) {
	k := kernel(t, "add_f32")
	const n = 1000
	a, b, c := alloc(t, 4*n), alloc(t, 4*n), alloc(t, 4*n)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range n {
		f32s(a)[i] = r.Float32()*2 - 1
		f32s(b)[i] = r.Float32()*2 - 1
	}
	scale := float32(1.7)
	dispatch(t, k, Size3{X: (n + 63) / 64}, Size3{X: 64}, []Arg{
		{Index: 0, Bytes: params(uint32(n), scale)},
		{Index: 1, Buffer: a}, {Index: 2, Buffer: b}, {Index: 3, Buffer: c},
	}, 0)
	for i := range n {
		want := float32(f32s(a)[i]*scale) + f32s(b)[i]
		if f32s(c)[i] != want {
			t.Fatalf("c[%d] = %v, want %v", i, f32s(c)[i], want)
		}
	}
}

func TestBindingErrors(t *testing.T) {
	k := kernel(t, "add_f32")
	buf := alloc(t, 64)
	cases := []struct {
		args []Arg
		want string
	}{
		{[]Arg{{Index: 0, Bytes: params(uint32(1), float32(1))}, {Index: 1, Buffer: buf}, {Index: 3, Buffer: buf}}, "[[buffer(2)]] (const device float* b) is not bound"},
		{[]Arg{{Index: 0, Bytes: params(uint32(1))}, {Index: 1, Buffer: buf}, {Index: 2, Buffer: buf}, {Index: 3, Buffer: buf}}, "has 4 bytes, needs at least 8"},
		{[]Arg{{Index: 31, Buffer: buf}}, "out of range"},
	}
	for _, c := range cases {
		err := k.Dispatch(Size3{X: 1}, Size3{X: 1}, c.args, 0)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
	}
	if err := k.Dispatch(Size3{X: 1}, Size3{X: 33, Y: 32}, nil, 0); err == nil || !strings.Contains(err.Error(), "1 to 1024") {
		t.Errorf("1056 threads per threadgroup: got %v", err)
	}
}

// The barrier makes the block reversal correct under every fiber order;
// without it, two seeds see different interleavings and give different bits.
func TestBarrierAndRace(t *testing.T) {
	const tg, groups = 256, 5
	n := tg * groups
	in := alloc(t, 4*n)
	for i := range n {
		f32s(in)[i] = float32(i) + 0.25
	}
	run := func(name string, seed uint64) []byte {
		out := alloc(t, 4*n)
		dispatch(t, kernel(t, name), Size3{X: groups}, Size3{X: tg}, []Arg{{Index: 0, Buffer: in}, {Index: 1, Buffer: out}}, seed)
		return out
	}
	for _, seed := range []uint64{0, 1, 2} {
		out := run("reverse_block_f32", seed)
		for i := range n {
			g, l := i/tg, i%tg
			if want := f32s(in)[g*tg+tg-1-l]; f32s(out)[i] != want {
				t.Fatalf("seed %d: out[%d] = %v, want %v", seed, i, f32s(out)[i], want)
			}
		}
	}
	r1, r2 := run("reverse_block_racy_f32", 1), run("reverse_block_racy_f32", 2)
	if bytes.Equal(r1, r2) {
		t.Fatal("the kernel without its barrier gave identical bits under seeds 1 and 2: the shuffled mode does not expose the race")
	}
}

// A tree reduction with a [[threadgroup(0)]] argument and a barrier per
// level; Go sums in the same tree order, so the bits must match.
func TestThreadgroupArgumentTreeSum(t *testing.T) {
	const tg, groups = 128, 7
	n := tg * groups
	in, out := alloc(t, 4*n), alloc(t, 4*groups)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range n {
		f32s(in)[i] = r.Float32()
	}
	for _, seed := range []uint64{0, 9} {
		dispatch(t, kernel(t, "tree_sum_f32"), Size3{X: groups}, Size3{X: tg},
			[]Arg{{Index: 0, Buffer: in}, {Index: 1, Buffer: out}, {Index: 0, Threadgroup: 4 * tg}}, seed)
		for g := range groups {
			s := append([]float32(nil), f32s(in)[g*tg:(g+1)*tg]...)
			for w := tg / 2; w > 0; w /= 2 {
				for i := range w {
					s[i] += s[i+w]
				}
			}
			if f32s(out)[g] != s[0] {
				t.Fatalf("seed %d: group %d sum %v, want %v", seed, g, f32s(out)[g], s[0])
			}
		}
	}
}

// Every SIMD-group function against Go, over full and partial SIMD groups
// (lanes past n return before the first collective). Inputs are quarters
// in [-2, 2] and integers below 2^18, so every sum is exact in float32 and
// the comparison is exact whatever the summation order.
func TestSimdFunctions(t *testing.T) {
	const n, tg = 100, 64
	const ops = 24
	x, u, out := alloc(t, 4*n), alloc(t, 4*n), alloc(t, 4*ops*n)
	r := rand.New(rand.NewPCG(5, 6))
	// Quarters in [-2, 2]: every reduction and scan over 32 lanes is exact
	// in f32 in any order, so results must equal the Go model exactly.
	for i := range n {
		f32s(x)[i] = float32(r.IntN(17)-8) / 4
		u32s(u)[i] = uint32(r.IntN(1 << 18))
	}
	k := kernel(t, "simd_ops")
	var first []byte
	for _, seed := range []uint64{0, 3} {
		clear(out)
		dispatch(t, k, Size3{X: (n + tg - 1) / tg}, Size3{X: tg}, []Arg{
			{Index: 0, Bytes: params(uint32(n))}, {Index: 1, Buffer: x}, {Index: 2, Buffer: u}, {Index: 3, Buffer: out},
		}, seed)
		if first == nil {
			first = append([]byte(nil), out...)
		} else if !bytes.Equal(first, out) {
			t.Fatal("SIMD-group results differ between seeds 0 and 3")
		}
	}
	xs, us, o := f32s(x), u32s(u), f32s(out)
	for gid := range n {
		lane := gid % 32
		want := simdOpsWant(xs, us, n, gid)
		for op, w := range want {
			if got := o[op*n+gid]; got != w {
				t.Errorf("op %d, thread %d (lane %d): got %v, want %v", op, gid, lane, got, w)
			}
		}
	}
}

// simdOpsWant is what simd_ops writes for thread gid, op by op, computed
// in Go over the thread's SIMD group of xs and us (n threads in all).
func simdOpsWant(xs []float32, us []uint32, n, gid int) []float32 {
	base := gid &^ 31 // SIMD groups are 32 consecutive threads of a threadgroup (tg is a multiple of 32)
	lane := gid - base
	active := func(l int) bool { return l >= 0 && l < 32 && base+l < n }
	val := func(l int) float32 { return xs[base+l] }
	var sum, incl, excl, maxv, minv, sum2 float32
	maxv, minv = float32(math.Inf(-1)), float32(math.Inf(1))
	var usum, umax, uor, uxor, uexcl uint32
	var ballot uint32
	anyv, allv := false, true
	firstLane := -1
	for l := range 32 {
		if !active(l) {
			continue
		}
		if firstLane < 0 {
			firstLane = l
		}
		v := val(l)
		sum += v
		sum2 += 2 * v
		if l <= lane {
			incl += v
		}
		if l < lane {
			excl += v
			uexcl += us[base+l]
		}
		maxv, minv = max(maxv, v), min(minv, v)
		usum += us[base+l]
		umax = max(umax, us[base+l])
		uor |= us[base+l]
		uxor ^= us[base+l]
		if v > 0 {
			ballot |= 1 << l
		}
		anyv = anyv || v > 2.5
		allv = allv && v > -2.5
	}
	shuf := func(src int) float32 {
		if active(src) {
			return val(src)
		}
		return val(lane)
	}
	var quad float32
	for l := lane &^ 3; l < lane&^3+4; l++ {
		if active(l) {
			quad += val(l)
		}
	}
	b2f := func(b bool) float32 {
		if b {
			return 1
		}
		return 0
	}
	up := val(lane)
	if lane >= 3 {
		up = shuf(lane - 3)
	}
	down := val(lane)
	if lane+3 < 32 {
		down = shuf(lane + 3)
	}
	return []float32{
		sum, maxv, minv, incl, excl,
		shuf((lane*7 + 3) & 31), shuf(lane ^ 5), up, down, shuf(2),
		float32(ballot & 0xffff), float32(ballot >> 16), b2f(anyv), b2f(allv),
		float32(usum), float32(umax), float32(uor & 0xffff), float32(uxor & 0xffff),
		quad, val(firstLane), b2f(lane == firstLane), shuf((lane + 5) & 31), sum2, float32(uexcl),
	}
}

// simdgroup_matrix multiply against Go. Operands are multiples of 1/64 in
// [-2, 2] (exact in half), so products and their sums over K=40 are exact in
// float32 and the results must match exactly; alpha = 0.5 is exact too.
func TestSimdgroupMatrix(t *testing.T) {
	const m, n, kk = 24, 16, 40
	r := rand.New(rand.NewPCG(7, 8))
	av := make([]float32, m*kk)
	bv := make([]float32, kk*n)
	for i := range av {
		av[i] = float32(r.IntN(257)-128) / 64
	}
	for i := range bv {
		bv[i] = float32(r.IntN(257)-128) / 64
	}
	want := make([]float32, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for q := range kk {
				s += float64(av[i*kk+q]) * float64(bv[q*n+j])
			}
			want[i*n+j] = float32(s * 0.5)
		}
	}
	for _, tc := range []struct {
		kernel     string
		half       bool
		transposed bool
	}{{"matmul_sg_f32", false, false}, {"matmul_sg_f32", false, true}, {"matmul_sg_f16", true, false}} {
		esize := 4
		if tc.half {
			esize = 2
		}
		a, b, c := alloc(t, esize*m*kk), alloc(t, esize*kk*n), alloc(t, 4*m*n)
		put := func(buf []byte, i int, v float32) {
			if tc.half {
				binary.LittleEndian.PutUint16(buf[2*i:], f32ToF16(v))
			} else {
				f32s(buf)[i] = v
			}
		}
		for i, v := range av {
			put(a, i, v)
		}
		for q := range kk {
			for j := range n {
				if tc.transposed {
					put(b, j*kk+q, bv[q*n+j])
				} else {
					put(b, q*n+j, bv[q*n+j])
				}
			}
		}
		tr := uint32(0)
		if tc.transposed {
			tr = 1
		}
		dispatch(t, kernel(t, tc.kernel), Size3{X: n / 8, Y: m / 8}, Size3{X: 32}, []Arg{
			{Index: 0, Bytes: params(uint32(m), uint32(n), uint32(kk), tr, float32(0.5))},
			{Index: 1, Buffer: a}, {Index: 2, Buffer: b}, {Index: 3, Buffer: c},
		}, 5)
		for i, w := range want {
			if f32s(c)[i] != w {
				t.Fatalf("%s transposed=%v: c[%d,%d] = %v, want %v", tc.kernel, tc.transposed, i/n, i%n, f32s(c)[i], w)
			}
		}
	}
}

// A product used as the operand of the next product, in a full SIMD group
// and in a partial one (20 lanes). Operands are multiples of 1/8 in [-1, 1]:
// every product and sum is exact in float32.
func TestSimdgroupMatrixChain(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 18))
	mats := make([][]float32, 3)
	bufs := make([][]byte, 3)
	for i := range mats {
		mats[i] = make([]float32, 64)
		bufs[i] = alloc(t, 256)
		for j := range mats[i] {
			mats[i][j] = float32(r.IntN(17)-8) / 8
		}
		copy(f32s(bufs[i]), mats[i])
	}
	mul := func(x, y []float32) []float32 {
		z := make([]float32, 64)
		for i := range 8 {
			for j := range 8 {
				for k := range 8 {
					z[i*8+j] += x[i*8+k] * y[k*8+j]
				}
			}
		}
		return z
	}
	want := mul(mul(mats[0], mats[1]), mats[2])
	for _, threads := range []int{32, 20} {
		for _, seed := range []uint64{0, 6} {
			q := alloc(t, 256)
			dispatch(t, kernel(t, "matmul_chain"), Size3{X: 1}, Size3{X: threads}, []Arg{
				{Index: 0, Buffer: bufs[0]}, {Index: 1, Buffer: bufs[1]}, {Index: 2, Buffer: bufs[2]}, {Index: 3, Buffer: q}}, seed)
			for i, w := range want {
				if f32s(q)[i] != w {
					t.Fatalf("%d threads, seed %d: q[%d,%d] = %v, want %v", threads, seed, i/8, i%8, f32s(q)[i], w)
				}
			}
		}
	}
}

// Threadgroup and device atomics from 391 threadgroups on two OS threads.
func TestAtomicsHistogram(t *testing.T) {
	const n, bins, tg = 100000, 37, 256
	keys, out := alloc(t, 4*n), alloc(t, 4*bins)
	r := rand.New(rand.NewPCG(9, 10))
	want := make([]uint32, bins)
	for i := range n {
		k := uint32(r.IntN(1 << 20))
		u32s(keys)[i] = k
		want[k%bins]++
	}
	dispatch(t, kernel(t, "histogram_u32"), Size3{X: (n + tg - 1) / tg}, Size3{X: tg}, []Arg{
		{Index: 0, Bytes: params(uint32(n), uint32(bins))}, {Index: 1, Buffer: keys}, {Index: 2, Buffer: out},
	}, 11)
	for i := range bins {
		if u32s(out)[i] != want[i] {
			t.Fatalf("bin %d: %d, want %d", i, u32s(out)[i], want[i])
		}
	}
}

func TestAtomicsMinMaxFloat(t *testing.T) {
	const n = 5000
	v, mm, total := alloc(t, 4*n), alloc(t, 8), alloc(t, 4)
	r := rand.New(rand.NewPCG(11, 12))
	lo, hi := int32(math.MaxInt32), int32(math.MinInt32)
	for i := range n {
		x := int32(r.IntN(2000001) - 1000000)
		*(*int32)(unsafe.Pointer(&v[4*i])) = x
		lo, hi = min(lo, x), max(hi, x)
	}
	*(*int32)(unsafe.Pointer(&mm[0])) = math.MaxInt32
	*(*int32)(unsafe.Pointer(&mm[4])) = math.MinInt32
	dispatch(t, kernel(t, "atomic_misc"), Size3{X: (n + 63) / 64}, Size3{X: 64}, []Arg{
		{Index: 0, Buffer: v}, {Index: 1, Buffer: mm}, {Index: 2, Buffer: total}, {Index: 3, Bytes: params(uint32(n))},
	}, 0)
	gotLo, gotHi := *(*int32)(unsafe.Pointer(&mm[0])), *(*int32)(unsafe.Pointer(&mm[4]))
	if gotLo != lo || gotHi != hi {
		t.Errorf("min/max %d/%d, want %d/%d", gotLo, gotHi, lo, hi)
	}
	// Every partial sum is a multiple of 0.5 below 2^23: exact in any order.
	if f32s(total)[0] != 0.5*n {
		t.Errorf("float atomic total %v, want %v", f32s(total)[0], 0.5*n)
	}
}

// Every position attribute on a 3D grid of 3D threadgroups whose size (60)
// is not a multiple of the SIMD width.
func TestPositions3D(t *testing.T) {
	groups, threads := Size3{3, 2, 2}, Size3{5, 3, 4}
	gx, gy, gz := groups.X*threads.X, groups.Y*threads.Y, groups.Z*threads.Z
	out := alloc(t, 4*16*gx*gy*gz)
	dispatch(t, kernel(t, "positions"), groups, threads, []Arg{{Index: 0, Buffer: out}}, 4)
	o := u32s(out)
	for z := range gz {
		for y := range gy {
			for x := range gx {
				lin := (z*gy+y)*gx + x
				lx, ly, lz := x%threads.X, y%threads.Y, z%threads.Z
				tid := (lz*threads.Y+ly)*threads.X + lx
				want := []int{x, y, z, x / threads.X, y / threads.Y, z / threads.Z, lx, ly, lz, tid,
					60, 12, tid / 32, tid % 32, 2, 32}
				for f, w := range want {
					if int(o[lin*16+f]) != w {
						t.Fatalf("thread (%d,%d,%d) field %d = %d, want %d", x, y, z, f, o[lin*16+f], w)
					}
				}
			}
		}
	}
}

// f32ToBF16 rounds to nearest even, keeping NaNs quiet.
func f32ToBF16(f float32) uint16 {
	u := math.Float32bits(f)
	if u&0x7fffffff > 0x7f800000 {
		return uint16(u>>16 | 0x40)
	}
	u += 0x7fff + (u>>16)&1
	return uint16(u >> 16)
}

// f32ToF16 rounds to nearest even (IEEE binary16), with subnormals.
func f32ToF16(f float32) uint16 {
	u := math.Float32bits(f)
	sign := uint16(u>>16) & 0x8000
	exp := int(u>>23&0xff) - 127 + 15
	mant := u & 0x7fffff
	switch {
	case u&0x7fffffff > 0x7f800000:
		return sign | 0x7e00
	case u&0x7fffffff == 0x7f800000:
		return sign | 0x7c00
	case exp >= 31:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		m := mant | 0x800000
		shift := uint(14 - exp)
		h := m >> shift
		rem := m & (1<<shift - 1)
		halfway := uint32(1) << (shift - 1)
		if rem > halfway || rem == halfway && h&1 == 1 {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || rem == 0x1000 && h&1 == 1 {
		h++ // may carry into the exponent, which is the correct rounding
	}
	return sign | uint16(h)
}

// float → bfloat must round to nearest even (ties included) and float →
// half likewise; the values below sit on and around the ties.
func TestConversions(t *testing.T) {
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 3.14159265, 65504, 65520, 1e-8, 6e-8, 1e-5, -2.5e-5,
		float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 1e30, -1e-30}
	for _, bits := range []uint32{0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001, 0x7f7f8000, 0x3f801000, 0x3f803000} {
		vals = append(vals, math.Float32frombits(bits))
	}
	r := rand.New(rand.NewPCG(13, 14))
	for range 200 {
		vals = append(vals, math.Float32frombits(r.Uint32()))
	}
	n := len(vals)
	x, bf, h, back := alloc(t, 4*n), alloc(t, 2*n), alloc(t, 2*n), alloc(t, 4*n)
	copy(f32s(x), vals)
	dispatch(t, kernel(t, "convert"), Size3{X: n}, Size3{X: 1}, []Arg{
		{Index: 0, Buffer: x}, {Index: 1, Buffer: bf}, {Index: 2, Buffer: h}, {Index: 3, Buffer: back}}, 0)
	for i, v := range vals {
		gotB := binary.LittleEndian.Uint16(bf[2*i:])
		if want := f32ToBF16(v); gotB != want {
			t.Errorf("bfloat(%g = %#08x) = %#04x, want %#04x", v, math.Float32bits(v), gotB, want)
		}
		gotH := binary.LittleEndian.Uint16(h[2*i:])
		wantH := f32ToF16(v)
		if gotH != wantH && !(math.IsNaN(float64(v)) && gotH&0x7c00 == 0x7c00 && gotH&0x3ff != 0) {
			t.Errorf("half(%g = %#08x) = %#04x, want %#04x", v, math.Float32bits(v), gotH, wantH)
		}
		wantBack := math.Float32frombits(uint32(f32ToBF16(v)) << 16)
		if g := f32s(back)[i]; g != wantBack && !(math.IsNaN(float64(g)) && math.IsNaN(float64(wantBack))) {
			t.Errorf("float(bfloat(%g)) = %g, want %g", v, g, wantBack)
		}
	}
}

// Vectors, swizzles, packed_float3 and math built-ins against Go; every
// operation is a single IEEE float op, so results must be exact.
func TestVectors(t *testing.T) {
	const n = 40
	in, p3, out := alloc(t, 16*n), alloc(t, 12*n), alloc(t, 16*n)
	r := rand.New(rand.NewPCG(15, 16))
	for i := range 4 * n {
		f32s(in)[i] = float32(r.IntN(400)-200) / 16
	}
	for i := range 3 * n {
		f32s(p3)[i] = float32(r.IntN(64)-32) / 8
	}
	dispatch(t, kernel(t, "vectors"), Size3{X: 5}, Size3{X: 8}, []Arg{{Index: 0, Buffer: in}, {Index: 1, Buffer: p3}, {Index: 2, Buffer: out}}, 0)
	for g := range n {
		v := f32s(in)[4*g : 4*g+4]
		q := f32s(p3)[3*g : 3*g+3]
		rr := []float32{v[1], v[0], q[2], 1}
		rr[0] += v[2] * 2
		rr[1] += v[3] * 2
		rr[2], rr[3] = max(rr[2], 0.5), max(rr[3], 0.5)
		s := [2]float32{1, 1}
		for i := range 2 {
			if v[i] < 0 {
				s[i] = -1
			}
		}
		rr[0] += s[0]*q[0] + s[1]*q[1]
		rr[3] = float32(math.FMA(float64(rr[3]), 2, float64(min(max(q[0], -1), 1))))
		ix := int32(v[0] * 10)
		rr[1] += float32(ix&7) + float32(31-int(math.Log2(float64(g+1))))
		for i := range 4 {
			if f32s(out)[4*g+i] != rr[i] {
				t.Fatalf("thread %d component %d: %v, want %v", g, i, f32s(out)[4*g+i], rr[i])
			}
		}
	}
}

func TestMaxThreadsAttribute(t *testing.T) {
	k := kernel(t, "limited")
	if k.MaxThreadsPerThreadgroup() != 64 || kernel(t, "add_f32").MaxThreadsPerThreadgroup() != 1024 {
		t.Errorf("limits %d and %d, want 64 and 1024", k.MaxThreadsPerThreadgroup(), kernel(t, "add_f32").MaxThreadsPerThreadgroup())
	}
	out := alloc(t, 4*128)
	if err := k.Dispatch(Size3{X: 1}, Size3{X: 128}, []Arg{{Index: 0, Buffer: out}}, 0); err == nil || !strings.Contains(err.Error(), "max_total_threads_per_threadgroup(64)") {
		t.Errorf("128 threads: got %v", err)
	}
	dispatch(t, k, Size3{X: 2}, Size3{X: 64}, []Arg{{Index: 0, Buffer: out}}, 0)
	for i, v := range f32s(out) {
		if v != 1 {
			t.Fatalf("out[%d] = %v", i, v)
		}
	}
}

func TestDeadlockReported(t *testing.T) {
	out := alloc(t, 4*64)
	err := kernel(t, "divergent_barrier").Dispatch(Size3{X: 2}, Size3{X: 64}, []Arg{{Index: 0, Buffer: out}}, 0)
	if err == nil || !strings.Contains(err.Error(), "deadlock") || !strings.Contains(err.Error(), "1 have returned") {
		t.Fatalf("got %v, want a deadlock naming the returned thread", err)
	}
}

// Memory faults inside kernels become dispatch errors naming the buffer,
// and the library keeps working afterwards.
func TestMemoryFaults(t *testing.T) {
	out := alloc(t, 4*64) // a multiple of 16 bytes: it ends flush at the guard page
	for _, seed := range []uint64{0, 1} {
		err := kernel(t, "write_past_end").Dispatch(Size3{X: 3}, Size3{X: 64}, []Arg{{Index: 0, Buffer: out}, {Index: 1, Bytes: params(uint32(64))}}, seed)
		if err == nil || !strings.Contains(err.Error(), "0 bytes past the end of [[buffer(0)]] (256 bytes)") {
			t.Fatalf("seed %d: got %v, want a fault just past buffer(0)", seed, err)
		}
	}
	// One page before the start: a 4096-byte step would stay inside the
	// buffer's own page where pages are 16 KiB (Apple silicon).
	page := os.Getpagesize()
	err := kernel(t, "read_before_start").Dispatch(Size3{X: 1}, Size3{X: 1}, []Arg{{Index: 0, Buffer: out}, {Index: 1, Bytes: params(uint32(page / 4))}}, 0)
	if want := fmt.Sprintf("%d bytes before the start of [[buffer(0)]] (256 bytes)", page); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want a fault before buffer(0): %q", err, want)
	}
	err = kernel(t, "stack_hog").Dispatch(Size3{X: 2}, Size3{X: 32}, []Arg{{Index: 0, Buffer: out}}, 0)
	if err == nil || !strings.Contains(err.Error(), "overflowed its 64 KiB stack") {
		t.Fatalf("got %v, want a stack overflow", err)
	}
	t.Log(err)
	// The runner recovered: a correct kernel still runs.
	TestBarrierAndRace(t)
}

func TestThreadgroupMemoryLimit(t *testing.T) {
	out := alloc(t, 4*32)
	err := kernel(t, "too_much_threadgroup").Dispatch(Size3{X: 1}, Size3{X: 32}, []Arg{{Index: 0, Buffer: out}}, 0)
	if err == nil || !strings.Contains(err.Error(), "32 KiB") {
		t.Fatalf("got %v, want the 32 KiB limit", err)
	}
	err = kernel(t, "tree_sum_f32").Dispatch(Size3{X: 1}, Size3{X: 32}, []Arg{{Index: 0, Buffer: out}, {Index: 1, Buffer: out}, {Index: 0, Threadgroup: 40000}}, 0)
	if err == nil || !strings.Contains(err.Error(), "32 KiB") {
		t.Fatalf("got %v, want the 32 KiB limit for [[threadgroup(0)]]", err)
	}
}

// Compiler errors and the source pass's own errors name the .metal line.
func TestErrorsNameTheMetalLine(t *testing.T) {
	cases := []struct {
		src  string
		want string
	}{
		{"#include <metal_stdlib>\nusing namespace metal;\n\nkernel void k(device float* x [[buffer(0)]],\n              uint i [[thread_position_in_grid]]) {\n    x[i] = 1.0f;\n    x[i] += undefined_name;\n}\n",
			"bad.metal:7:"},
		{"#include <metal_stdlib>\nusing namespace metal;\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n    if (i == 0) {\n        threadgroup float t[4];\n        t[0] = 1;\n    }\n}\n",
			"bad.metal:5: threadgroup variable \"t\""},
		{"#include <metal_stdlib>\nkernel void k(device float* x [[buffer(0)]],\n  uint i) {\n}\n",
			"bad.metal:3: kernel parameter \"uint i\" has no"},
		{"#include <metal_stdlib>\nkernel void k(device float* x [[buffer(0)]], uint i [[sample_id]]) {\n}\n",
			"bad.metal:2: parameter \"uint i\": attribute [[sample_id]] is not supported"},
		// g++ takes a helper's generic pointer; Metal does not (lint.go).
		{"#include <metal_stdlib>\ninline float at(const float* x, uint i) { return x[i]; }\nkernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n    x[i] = at(x, i);\n}\n",
			"bad.metal:2: parameter \"const float* x\": a pointer or reference parameter needs an address space"},
	}
	for _, c := range cases {
		_, err := Compile(map[string]string{"bad.metal": c.src}, Options{PathPrefix: "x/"})
		if err == nil || !strings.Contains(err.Error(), "x/"+c.want) {
			t.Errorf("got %v\nwant an error containing %q", err, "x/"+c.want)
		}
	}
}

func TestNames(t *testing.T) {
	names := strings.Join(testLib(t).Names(), " ")
	for _, n := range []string{"add_f32", "reverse_block_f32", "reverse_block_racy_f32", "matmul_sg_f16", "positions"} {
		if !strings.Contains(names, n) {
			t.Errorf("kernel %s missing from %s", n, names)
		}
	}
	if _, err := testLib(t).Kernel("nope"); err == nil || !strings.Contains(err.Error(), "no kernel named") {
		t.Errorf("unknown kernel: %v", err)
	}
}

// Per-dispatch cost of a one-threadgroup dispatch (the calling thread runs
// it) and of a 64-threadgroup one (the pool takes part).
func BenchmarkDispatchOneGroup(b *testing.B) {
	benchAdd(b, 1)
}

func BenchmarkDispatch64Groups(b *testing.B) {
	benchAdd(b, 64)
}

// The same on one OS thread: the runner's own cost per threadgroup of 32
// fibers, without waking the pool.
func BenchmarkDispatch64GroupsOneThread(b *testing.B) {
	lib, err := Compile(testSources(b), Options{PathPrefix: "testdata/", Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	k, err := lib.Kernel("add_f32")
	if err != nil {
		b.Fatal(err)
	}
	benchKernel(b, k, 64)
}

func benchAdd(b *testing.B, groups int) {
	benchKernel(b, kernel(b, "add_f32"), groups)
}

func benchKernel(b *testing.B, k *Kernel, groups int) {
	n := 32 * groups
	a, c := alloc(b, 4*n), alloc(b, 4*n)
	args := []Arg{{Index: 0, Bytes: params(uint32(n), float32(1))}, {Index: 1, Buffer: a}, {Index: 2, Buffer: a}, {Index: 3, Buffer: c}}
	b.ResetTimer()
	for range b.N {
		if err := k.Dispatch(Size3{X: groups}, Size3{X: 32}, args, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// A Compile whose objects and library are cached: the source pass, hashing
// and file checks only.
func BenchmarkCompileWarm(b *testing.B) {
	src := testSources(b)
	testLib(b)
	b.ResetTimer()
	for range b.N {
		if _, err := Compile(src, Options{PathPrefix: "testdata/", Threads: 2}); err != nil {
			b.Fatal(err)
		}
	}
}

// The runner's SIGSEGV handler must hand faults outside kernels back to the
// Go runtime: a nil dereference in Go still panics (recoverably) after a
// kernel has faulted and the handler is installed.
func TestGoFaultsStillPanic(t *testing.T) {
	out := alloc(t, 4*64)
	if err := kernel(t, "write_past_end").Dispatch(Size3{X: 3}, Size3{X: 64}, []Arg{{Index: 0, Buffer: out}, {Index: 1, Bytes: params(uint32(64))}}, 0); err == nil {
		t.Fatal("the out-of-bounds kernel did not fault")
	}
	var p *[4]int
	func() {
		defer func() {
			r := recover()
			if r == nil || !strings.Contains(fmt.Sprint(r), "nil pointer dereference") {
				t.Errorf("recovered %v, want a nil pointer dereference panic", r)
			}
		}()
		p[1] = 3
	}()
}

// A sweep of shim built-ins (swizzles, vectors of several element types,
// packed types and sizes, bfloat, integer bit functions, math, SIMD and quad
// functions on vectors and half, threadgroup atomics including exchange and
// compare-exchange) against values worked out by hand below. Every input is
// a quarter, so every expected value is exact.
func TestBuiltins(t *testing.T) {
	const n, k = 32, 24
	x, out := alloc(t, 4*n), alloc(t, 4*n*k)
	for i := range n {
		f32s(x)[i] = float32(i-12) / 4
	}
	for _, seed := range []uint64{0, 8} {
		clear(out)
		dispatch(t, kernel(t, "builtins"), Size3{X: 1}, Size3{X: n}, []Arg{{Index: 0, Buffer: x}, {Index: 1, Buffer: out}}, seed)
		clamp01 := func(v float32) float32 { return min(max(v, 0), 1) }
		for i := range n {
			a := float32(i-12) / 4
			v := [4]float32{a + 1, a, a + 2, a + 3}
			var sel float32
			for _, c := range v {
				if c > 0 {
					sel += 2
				} else {
					sel--
				}
			}
			bits := uint32(0xf0 + i)
			clz := 24
			if bits >= 256 {
				clz = 23
			}
			sign := float32(0)
			if a > 0 {
				sign = 1
			} else if a < 0 {
				sign = -1
			}
			step := float32(0)
			if a >= 0.5 {
				step = 1
			}
			ai := i - 12
			want := []float32{
				1, 1, 3*a + 7, -3, 16257, 1,
				clamp01(v[0]) + clamp01(v[3]), sel, 7.5, float32(31-12)/4 + 2, 28,
				float32((i&^3|1)-12) / 4, a + 88, 3 + a, 5,
				float32(bits32(bits) + clz + 8 + 1 + 0xbc),
				a - float32(math.Floor(float64(a))) + sign + step + 0.5,
				float32(min(ai, 3) + max(-1, abs(ai))),
				1, 32, 2, 1, 2*a + 1.5, 2*a + 4,
			}
			for j, w := range want {
				if got := f32s(out)[i*k+j]; got != w {
					t.Errorf("seed %d, thread %d, result %d: %v, want %v", seed, i, j, got, w)
				}
			}
		}
	}
}

func bits32(u uint32) int {
	n := 0
	for ; u != 0; u &= u - 1 {
		n++
	}
	return n
}

func abs(i int) int {
	if i < 0 {
		return -i
	}
	return i
}

// Collectives after some lanes returned, under several fiber orders: each
// sums exactly the lanes still running (small integers: exact).
func TestSimdAfterLanesReturn(t *testing.T) {
	var a, b, d float32
	live1 := func(l int) bool { return l%5 != 4 }
	live2 := func(l int) bool { return live1(l) && l <= 20 }
	for l := range 32 {
		a += float32(l)
		if live1(l) {
			b += 2 * float32(l)
		}
		if live2(l) {
			d += float32(l) + 1
		}
	}
	for _, seed := range []uint64{0, 1, 2, 3, 4} {
		out := alloc(t, 4*4*32)
		dispatch(t, kernel(t, "simd_after_exit"), Size3{X: 1}, Size3{X: 32}, []Arg{{Index: 0, Buffer: out}}, seed)
		for l := range 32 {
			if !live2(l) {
				continue
			}
			c := float32(l)
			if l+1 < 32 && live2(l+1) {
				c = float32(l + 1)
			}
			want := []float32{a, b, c, d}
			for j, w := range want {
				if got := f32s(out)[l*4+j]; got != w {
					t.Errorf("seed %d lane %d result %d: %v, want %v", seed, l, j, got, w)
				}
			}
		}
	}
}

func TestExtras(t *testing.T) {
	x, out := alloc(t, 4*32), alloc(t, 4*8*32)
	xs := f32s(x)
	for i := range 32 {
		xs[i] = float32(i)/4 - 3
	}
	dispatch(t, kernel(t, "extras"), Size3{X: 1}, Size3{X: 32}, []Arg{{Index: 0, Buffer: x}, {Index: 1, Buffer: out}}, 2)
	for l := range 32 {
		v := xs[l]
		// Past the end, fill values come from the filling argument (-x)
		// at the wrapped-around lane.
		var down, up float32
		if l+3 < 32 {
			down = xs[l+3]
		} else {
			down = -xs[l+3-32]
		}
		base, pos := l/8*8, l%8
		if pos >= 2 {
			up = xs[base+pos-2]
		} else {
			up = -xs[base+pos+8-2]
		}
		med := max(min(v, 1), min(max(v, 1), -1))
		want := []float32{down, up, max(v, 1) + min(v, -1) + med, 1, float32(l%4) + 10*float32(l/4), max(v, 0.5), 0, 0}
		for j, w := range want {
			if got := f32s(out)[l*8+j]; got != w {
				t.Errorf("lane %d result %d: %v, want %v", l, j, got, w)
			}
		}
	}
}

// 50 SIMD sums and 50 threadgroup barriers per thread, 8 threadgroups of
// 128 threads, on one OS thread: the cost of switching fibers.
func BenchmarkCollectives(b *testing.B) {
	lib, err := Compile(testSources(b), Options{PathPrefix: "testdata/", Threads: 1})
	if err != nil {
		b.Fatal(err)
	}
	k, err := lib.Kernel("collectives")
	if err != nil {
		b.Fatal(err)
	}
	out := alloc(b, 4*128*8)
	b.ResetTimer()
	for range b.N {
		if err := k.Dispatch(Size3{X: 8}, Size3{X: 128}, []Arg{{Index: 0, Buffer: out}}, 0); err != nil {
			b.Fatal(err)
		}
	}
}

// The fiber stacks are slots of an inaccessible guard and a usable stack,
// both in whole pages: with a guard smaller than the page (4 KiB guards on
// Apple silicon's 16 KiB pages), mprotect either fails on a guard that does
// not start on a page or takes the bottom of a usable stack with it. The
// guard is at least 64 KiB, since arm64 compilers do not probe big frames
// page by page.
func TestStackLayout(t *testing.T) {
	fn, err := purego.Dlsym(testLib(t).handle, "emu_stack_layout")
	if err != nil {
		t.Fatal(err)
	}
	for _, page := range []uintptr{4096, 16384, 65536} {
		var out [3]uintptr
		purego.SyscallN(fn, page, uintptr(unsafe.Pointer(&out[0])))
		guard, usable, stride := out[0], out[1], out[2]
		if guard < page || guard < 64<<10 || guard%page != 0 || usable < 64<<10 || usable%page != 0 || stride != guard+usable {
			t.Errorf("%d-byte pages: guard %d, usable %d, slot %d bytes; want a guard of whole pages and at least 64 KiB, at least 64 KiB of "+
				"whole pages above it, and the slot the sum", page, guard, usable, stride)
		}
	}
}

// The stacks as mapped on this machine: every guard page inaccessible and
// every usable stack writable from end to end. Under qemu-aarch64 -p 16384
// (make arm64-test) the runner sees 16 KiB pages.
func TestFiberStacksOnThisMachine(t *testing.T) {
	fn, err := purego.Dlsym(testLib(t).handle, "emu_check_stacks")
	if err != nil {
		t.Fatal(err)
	}
	msg := make([]byte, 512)
	r, _, _ := purego.SyscallN(fn, uintptr(unsafe.Pointer(&msg[0])), uintptr(len(msg)))
	if r != 0 {
		t.Fatalf("page size %d: %s", os.Getpagesize(), msg[:bytes.IndexByte(msg, 0)])
	}
	t.Logf("page size %d", os.Getpagesize())
	// The stacks serve dispatches afterwards.
	TestBarrierAndRace(t)
}
