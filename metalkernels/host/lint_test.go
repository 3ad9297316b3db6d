package host

import (
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/metalkernels"
)

const lintHead = "#include <metal_stdlib>\nusing namespace metal;\n"

// Each case is MSL that g++ compiles through the shim (the address spaces
// expand to nothing there) but Apple's compiler rejects; the lint must
// name the line (lintHead is lines 1-2, so the snippet starts at line 3).
func TestLintRejectsWhatMetalRejects(t *testing.T) {
	cases := []struct {
		name, src, want string
	}{
		{"helper pointer parameter",
			"inline float first(const float* x) { return x[0]; }\n",
			"bad.metal:3: parameter \"const float* x\": a pointer or reference parameter needs an address space"},
		{"helper reference parameter",
			"\ninline void bump(float& acc, float v) { acc += v; }\n",
			"bad.metal:4: parameter \"float& acc\""},
		{"template helper pointer parameter",
			"template <typename T>\ninline T load(T* p,\n             uint i) { return p[i]; }\n",
			"bad.metal:4: parameter \"T* p\""},
		{"member function parameter",
			"struct Acc {\n    float s;\n    void add(thread float* v) { s += v[0]; }\n    void sub(float* v) { s -= v[0]; }\n};\n",
			"bad.metal:6: parameter \"float* v\""},
		{"local pointer",
			"kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n    float* p = x + i;\n    p[0] = 1.0f;\n}\n",
			"bad.metal:4: variable \"float* p\": a pointer or reference type needs an address space"},
		{"local reference",
			"kernel void k(device float* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n    float& r = x[i];\n    r = 1.0f;\n}\n",
			"bad.metal:4: variable \"float& r\""},
		{"struct member pointer",
			"struct Ref {\n    const uchar* data;\n    uint n;\n};\n",
			"bad.metal:4: variable \"const uchar* data\""},
		{"function returning a pointer",
			"inline float* row(device float* x, uint i) { return x + i; }\n",
			"bad.metal:3: function returning \"inline float* row\""},
		{"C cast",
			"inline float word(device uchar* b) {\n    return ((const float*)b)[0];\n}\n",
			"bad.metal:4: cast to a pointer or reference without an address space"},
		{"named cast",
			"inline float word(device uchar* b) {\n    return reinterpret_cast<const float*>(b)[0];\n}\n",
			"bad.metal:4: reinterpret_cast to a pointer or reference without an address space"},
		{"double",
			"inline float twice(float x) {\n    double d = x;\n    return float(d * 2);\n}\n",
			"bad.metal:4: \"double\" is not MSL"},
		{"std library",
			"inline float smaller(float a, float b) { return std::min(a, b); }\n",
			"bad.metal:3: std:: is not available in MSL"},
		{"lambda",
			"inline float sq(float x) {\n    auto f = [&](float v) { return v * v; };\n    return f(x);\n}\n",
			"bad.metal:4: lambda expression: MSL 3.1 has none"},
		{"goto",
			"inline float f(float x) {\nagain:\n    if (x > 1.0f) { x *= 0.5f; goto again; }\n    return x;\n}\n",
			"bad.metal:5: \"goto\" is not MSL"},
		{"virtual",
			"struct Op {\n    virtual float run(float x) { return x; }\n};\n",
			"bad.metal:4: \"virtual\" is not MSL"},
		{"derived class",
			"struct Base { float a; };\nstruct Derived : Base { float b; };\n",
			"bad.metal:4: struct Derived derives from another class"},
		{"static local",
			"inline float f(float x) {\n    static float last;\n    return x + last;\n}\n",
			"bad.metal:4: a static variable \"last\" must be in the constant address space"},
		{"static member",
			"struct Tile {\n    static const uint rows = 8;\n};\n",
			"bad.metal:4: a static variable \"rows\" must be in the constant address space"},
		{"program-scope variable",
			"\nfloat table[2] = {1.0f, 2.0f};\n",
			"bad.metal:4: a program-scope variable \"table\" must be in the constant address space"},
		{"infinity sentinel",
			"inline float biggest(const device float* x, uint n) {\n    float m = -INFINITY;\n    for (uint i = 0; i < n; i++) { m = max(m, x[i]); }\n    return m;\n}\n",
			"bad.metal:4: INFINITY under Metal's default fast math"},
		{"isnan",
			"inline bool bad(float x) {\n    return isnan(x);\n}\n",
			"bad.metal:4: isnan under Metal's default fast math"},
		{"position vector and scalar",
			"kernel void k(device float* x [[buffer(0)]],\n              uint3 tg [[threadgroup_position_in_grid]],\n              uint n [[threads_per_threadgroup]]) {\n    x[tg.x] = float(n);\n}\n",
			"bad.metal:3: kernel k: [[threads_per_threadgroup]] has 1 components but [[threadgroup_position_in_grid]] has 3"},
		{"position int",
			"kernel void k(device float* x [[buffer(0)]], int i [[thread_position_in_grid]]) {\n    x[i] = 1.0f;\n}\n",
			"bad.metal:3: kernel k: [[thread_position_in_grid]] is int; MSL takes ushort or uint"},
		{"scalar-only position",
			"kernel void k(device float* x [[buffer(0)]], uint2 lane [[thread_index_in_simdgroup]]) {\n    x[lane.x] = 1.0f;\n}\n",
			"bad.metal:3: kernel k: [[thread_index_in_simdgroup]] is uint2; MSL takes a scalar"},
		{"threadgroup types differ",
			"kernel void k(device float* x [[buffer(0)]], ushort2 l [[thread_position_in_threadgroup]],\n              uint2 n [[threads_per_threadgroup]]) {\n    x[l.x] = float(n.x);\n}\n",
			"bad.metal:3: kernel k: [[thread_position_in_threadgroup]] is ushort2 but [[threads_per_threadgroup]] is uint2"},
		{"instantiation parameters",
			"template <typename T>\nkernel void k(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = T(1); }\ntemplate [[host_name(\"k_f32\")]] kernel void k<float>(float* x [[buffer(0)]], uint i [[thread_position_in_grid]]);\n",
			"bad.metal:5: parameter \"float* x\""},
	}
	for _, c := range cases {
		_, err := runPass("bad.metal", lintHead+c.src, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v\nwant an error containing %q", c.name, err, c.want)
		}
	}
}

// Correct MSL, written the ways the kernels write it, passes: the lint must
// not mistake expressions for declarations.
func TestLintAcceptsMSL(t *testing.T) {
	src := lintHead + `#define N 4
constant float kTable[2] = {1.0f, 2.0f};
struct Tile {
    static constant constexpr uint rows = 8;
    device float* dst;
    const device ushort* scales;
    void operator()(uint j, float v) const { dst[j] = v; }
};
template <typename T, int M>
inline void stage(threadgroup T* s, const device T* x, thread float& acc, constant uint& n) {
    for (uint i = 0; i < n * M; i += 32) {
        s[i] = x[i];
        acc += float(x[i]) * 2.0f;
    }
}
inline float pick(const device float* x, uint i) {
    const device float4* v = (const device float4*)x;
    thread const float* q = nullptr;
    auto& first = x[0];
    float a = x[i] * x[i + 1], b = x[i] & 1 ? 1.0f : 0.0f;
    return v[0].x + first + a + b + (q != nullptr ? 1.0f : 0.0f) + kTable[i & 1];
}
kernel void k(constant uint& n [[buffer(0)]],
              device float* y [[buffer(1)]],
              uint3 tg [[threadgroup_position_in_grid]],
              uint3 size [[threads_per_threadgroup]],
              ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float tile[N * 32];
    Tile t;
    t.dst = y;
    t(lane, float(tg.x * size.x));
    float acc = 0.0f;
    stage<float, N>(tile, y, acc, n);
    y[lane] *= acc;
}
template <typename T>
kernel void gen(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) { x[i] = T(1); }
template [[host_name("gen_f32")]] [[kernel]] decltype(gen<float>) gen<float>;
template [[host_name("gen_f16")]] kernel void gen<half>(device half* x [[buffer(0)]], uint i [[thread_position_in_grid]]);
`
	if _, err := runPass("ok.metal", src, nil); err != nil {
		t.Fatalf("correct MSL rejected:\n%v", err)
	}
}

// The project's kernels and the emulator's own test kernels pass the lint
// (headers first, as Compile runs them, for their #defines).
func TestLintAcceptsProjectKernels(t *testing.T) {
	sets := map[string]map[string]string{"metalkernels/": metalkernels.Sources(), "testdata/": {}}
	for _, n := range []string{"emu_test.metal", "emu_test_common.h"} {
		b, err := os.ReadFile("testdata/" + n)
		if err != nil {
			t.Fatal(err)
		}
		sets["testdata/"][n] = string(b)
	}
	for prefix, sources := range sets {
		var names []string
		for n := range sources {
			names = append(names, n)
		}
		// Headers (.h) sort before .metal files here: their #defines
		// name buffer indices.
		sort.Slice(names, func(i, j int) bool {
			hi, hj := strings.HasSuffix(names[i], ".h"), strings.HasSuffix(names[j], ".h")
			if hi != hj {
				return hi
			}
			return names[i] < names[j]
		})
		defines := map[string]string{}
		known := map[string][]funcSig{}
		for _, n := range names {
			if strings.HasSuffix(n, ".h") {
				for k, v := range collectSignatures(sources[n]) {
					known[k] = append(known[k], v...)
				}
			}
		}
		if len(known["bf16_to_float"]) == 0 && prefix == "metalkernels/" {
			t.Fatalf("no signatures collected from common.h: %v", known)
		}
		for _, n := range names {
			res, err := runPassKnown(prefix+n, sources[n], defines, known)
			if err != nil {
				t.Errorf("%v", err)
				continue
			}
			for k, v := range res.defines {
				defines[k] = v
			}
		}
	}
}

// Includes resolve as on the Metal device: quoted names only from the
// sources, <…> only Metal's own headers. g++ would find both kinds
// elsewhere (the shim directory, the C++ library).
func TestLintIncludes(t *testing.T) {
	sources := map[string]string{
		"common.h": "#pragma once\n#include <metal_stdlib>\n",
		"a.metal":  "#include <metal_stdlib>\n#include <metal_simdgroup_matrix>\n  #  include \"common.h\"\n",
		"b.metal":  "#include <metal_stdlib>\n#include \"emu_metal.h\"\n#include <cmath>\n#include \"common.h\"\n",
	}
	if err := lintIncludes("a.metal", sources["a.metal"], sources); err != nil {
		t.Errorf("a.metal: %v", err)
	}
	err := lintIncludes("b.metal", sources["b.metal"], sources)
	for _, want := range []string{
		"b.metal:2: #include \"emu_metal.h\": no such file among the kernel sources",
		"b.metal:3: #include <cmath>: not a Metal standard header",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("got %v\nwant an error containing %q", err, want)
		}
	}
	if err != nil && strings.Contains(err.Error(), "b.metal:4") {
		t.Errorf("common.h is among the sources, yet: %v", err)
	}
	// Compile runs the check before the compiler.
	_, err = Compile(map[string]string{"c.metal": "#include <metal_stdlib>\n#include \"missing.h\"\n"}, Options{PathPrefix: "x/"})
	if err == nil || !strings.Contains(err.Error(), "x/c.metal:2: #include \"missing.h\"") {
		t.Errorf("Compile: got %v, want the missing include named at x/c.metal:2", err)
	}
}

// Calls into the project's functions with memory of another address space:
// g++ sees plain pointers, Metal has no conversion.
func TestLintCallAddressSpaces(t *testing.T) {
	helpers := `inline float sum4(const device float* x) { return x[0] + x[1] + x[2] + x[3]; }
inline void bump(thread float& acc, float v) { acc += v; }
inline float first(const device float* x) { return x[0]; }
inline float first(const threadgroup float* x) { return x[0]; }
`
	kernel := func(body string) string {
		return lintHead + helpers + "kernel void k(device float* y [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {\n" +
			"    threadgroup float tile[64];\n    float acc = 0.0f;\n    float local[4];\n" + body + "}\n"
	}
	// lintHead is 2 lines, helpers 4, the kernel's opening and declarations
	// 4: the body starts at line 11.
	cases := []struct{ name, body, want string }{
		{"threadgroup array to device", "    y[i] = sum4(tile);\n",
			"bad.metal:11: sum4: argument 1 (tile) points to threadgroup memory, but parameter \"const device float* x\" takes device"},
		{"threadgroup arithmetic to device", "    y[i] = sum4(tile + 4);\n",
			"bad.metal:11: sum4: argument 1 (tile + 4) points to threadgroup memory"},
		{"thread array to device", "    y[i] = sum4(local);\n",
			"bad.metal:11: sum4: argument 1 (local) points to thread memory"},
		{"address of a local", "    y[i] = sum4(&acc);\n",
			"bad.metal:11: sum4: argument 1 (&acc) points to thread memory"},
		{"device element to thread reference", "    bump(y[i], 1.0f);\n",
			"bad.metal:11: bump: argument 1 (y[i]) is device memory, but parameter \"thread float& acc\" takes thread"},
		{"pointer initialized from another space", "    const device float* p = tile + 2;\n    y[i] = p[0];\n",
			"bad.metal:11: \"const device float* p\" is initialized with tile + 2, which points to threadgroup memory"},
		{"reference bound to another space", "    thread float& r = y[i];\n    r = 1.0f;\n",
			"bad.metal:11: \"thread float& r\" is initialized with y[i], which is device memory"},
		{"cast between spaces", "    y[i] = ((device float*)tile)[0];\n",
			"bad.metal:11: cast of tile, which points to threadgroup memory, to a device pointer"},
		{"cast of an expression between spaces", "    y[i] = *(const device float4*)(local + 0);\n",
			"bad.metal:11: cast of local + 0, which points to thread memory, to a device pointer"},
	}
	for _, c := range cases {
		_, err := runPass("bad.metal", kernel(c.body), nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v\nwant an error containing %q", c.name, err, c.want)
		}
	}
	// Matching spaces, and an overload per space, pass.
	ok := "    threadgroup float* tp = tile + 4;\n    thread float& lr = local[0];\n    const device float4* v4 = (const device float4*)(y + i);\n    lr += tp[0] + v4[0].x + ((threadgroup float*)tile)[1];\n" +
		"    bump(acc, sum4(y));\n    bump(local[1], sum4(y + 4) + first(tile) + first(y + i));\n    y[i] = acc + local[1];\n"
	if _, err := runPass("ok.metal", kernel(ok), nil); err != nil {
		t.Errorf("matching address spaces rejected: %v", err)
	}
	// A header's helper, called from a .metal file, through Compile.
	_, err := Compile(map[string]string{
		"h.h":     "#pragma once\n#include <metal_stdlib>\nusing namespace metal;\ninline float sum2(const device float* x) { return x[0] + x[1]; }\n",
		"u.metal": "#include \"h.h\"\nkernel void k(device float* y [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {\n    threadgroup float t[2];\n    t[i & 1] = y[i];\n    threadgroup_barrier(mem_flags::mem_threadgroup);\n    y[i] = sum2(t);\n}\n",
	}, Options{PathPrefix: "x/"})
	if err == nil || !strings.Contains(err.Error(), "x/u.metal:6: sum2: argument 1 (t) points to threadgroup memory") {
		t.Errorf("call into a header: got %v", err)
	}
}
