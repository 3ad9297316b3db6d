package host

import (
	"strings"
	"testing"
)

const passSrc = `#include <metal_stdlib>
using namespace metal;
#define OUT_BUF 2
// A comment with kernel void fake(device float* x [[buffer(9)]]) and "threadgroup float z[2];"
struct P { constant float* table; uint n; };
constant float kTable[2] = {1.0f, 2.0f};

template <typename T>
kernel void scale(constant P& p [[buffer(0)]],
                  const device T* x [[ buffer( 1 ) ]],
                  device T* y [[buffer(OUT_BUF)]],
                  threadgroup float* scratch [[threadgroup(0)]],
                  uint2 gid [[thread_position_in_grid]],
                  ushort lane [[thread_index_in_simdgroup]]) {
    threadgroup float tile[64][2];
    threadgroup atomic_uint count;
    threadgroup float* alias = &tile[0][0];
    constant char* s = "device constant thread";
    float h = 1.5h + 2h;
    y[gid.x] = x[gid.x] * T(h) + alias[0] + scratch[0];
}
template [[host_name("scale_f32")]] [[kernel]] decltype(scale<float>) scale<float>;
template [[host_name("scale_f16")]] kernel void scale<half>(constant P& p [[buffer(0)]], const device half* x [[buffer(1)]], device half* y [[buffer(OUT_BUF)]], threadgroup float* scratch [[threadgroup(0)]], uint2 gid [[thread_position_in_grid]], ushort lane [[thread_index_in_simdgroup]]);

[[kernel]] void plain(device uint* out [[buffer(0)]], uint i [[thread_index_in_threadgroup]]) {
    out[i] = i;
}
`

func TestPassRewrites(t *testing.T) {
	res, err := runPass("p.metal", passSrc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Count(res.out, "\n"), strings.Count(passSrc, "\n"); got != want {
		t.Errorf("output has %d lines, input %d: line numbers would drift", got, want)
	}
	outLines := strings.Split(res.out, "\n")
	line := func(n int) string { return outLines[n-1] }
	checks := []struct {
		line     int
		contains string
		absent   string
	}{
		{4, `kernel void fake(device float* x [[buffer(9)]]) and "threadgroup float z[2];"`, ""}, // comments untouched
		{5, "struct P {          float* table;", "constant"},
		{6, "static const float kTable[2]", "constant"},
		{9, "       void scale(", "kernel"},
		{10, "const        T* x", "[["},
		{15, "auto& tile = ::emu::tg_var<float[64][2]>();", "threadgroup"},
		{16, "auto& count = ::emu::tg_var<atomic_uint>();", ""},
		{17, "float* alias = &tile[0][0];", "threadgroup"},
		{18, `"device constant thread"`, ""}, // strings untouched
		{19, "((half)1.5) + ((half)2)", "1.5h"},
		{22, "template", "host_name"},
	}
	for _, c := range checks {
		l := line(c.line)
		if !strings.Contains(l, c.contains) || (c.absent != "" && strings.Contains(l, c.absent)) {
			t.Errorf("line %d: %q\nwant it to contain %q and not %q", c.line, l, c.contains, c.absent)
		}
	}

	if len(res.kernels) != 2 || res.kernels[0].name != "scale" || !res.kernels[0].template || res.kernels[1].name != "plain" || res.kernels[1].template {
		t.Fatalf("kernels: %+v", res.kernels)
	}
	want := []Param{
		{Attr: "buffer", Index: 0}, {Attr: "buffer", Index: 1}, {Attr: "buffer", Index: 2},
		{Attr: "threadgroup", Index: 0}, {Attr: "thread_position_in_grid", Index: -1}, {Attr: "thread_index_in_simdgroup", Index: -1},
	}
	for i, p := range res.kernels[0].params {
		if p.Attr != want[i].Attr || p.Index != want[i].Index {
			t.Errorf("param %d (%s): %s %d, want %s %d", i, p.Text, p.Attr, p.Index, want[i].Attr, want[i].Index)
		}
	}
	if res.kernels[0].params[1].Text != "const device T* x" {
		t.Errorf("param text %q", res.kernels[0].params[1].Text)
	}
	if len(res.instances) != 2 {
		t.Fatalf("instances: %+v", res.instances)
	}
	in0, in1 := res.instances[0], res.instances[1]
	if in0.host != "scale_f32" || in0.name != "scale" || in0.args != "<float>" || in0.hasPar {
		t.Errorf("decltype instantiation: %+v", in0)
	}
	// The spelled-out instantiation repeats the attributes (Metal wants
	// them), and its list is the one bound.
	if in1.host != "scale_f16" || in1.name != "scale" || in1.args != "<half>" || !in1.hasPar || len(in1.params) != 6 || in1.params[2].Index != 2 {
		t.Errorf("spelled-out instantiation: %+v", in1)
	}
	ents, err := collectEntries("p.metal", res, map[string]*kernelDef{"scale": &res.kernels[0]})
	if err != nil {
		t.Fatal(err)
	}
	gen := genEntries(ents)
	for _, w := range []string{
		"void emu_k_plain() { plain(::emu::buf(0), ::emu::pos(::emu::kThreadIndexInThreadgroup)); }",
		"void emu_k_scale_f32() { scale<float>(::emu::buf(0), ::emu::buf(1), ::emu::buf(2), ::emu::tgbuf(0), ::emu::pos(::emu::kThreadPositionInGrid), ::emu::pos(::emu::kThreadIndexInSimdgroup)); }",
		"void emu_k_scale_f16() { scale<half>(",
		"case 2: return ::emu::min_size<F::at<2>>();",
	} {
		if !strings.Contains(gen, w) {
			t.Errorf("generated entries lack %q:\n%s", w, gen)
		}
	}
}

func TestPassRejects(t *testing.T) {
	cases := []struct{ src, want string }{
		{"kernel void k(device float* x [[buffer(0)]]) {\n  for (int i = 0; i < 2; i++) {\n    threadgroup float t[4];\n  }\n}\n",
			`f.metal:3: threadgroup variable "t": declared inside a block of kernel k`},
		{"void helper() {\n  threadgroup float t[4];\n}\n",
			`f.metal:2: threadgroup variable "t": declare threadgroup variables at the top level`},
		{"kernel void k(device float* x [[buffer(0)]]) {\n  threadgroup float a[4], b[4];\n}\n",
			`f.metal:2: threadgroup variable "a": several variables in one declaration`},
		{"kernel void k(device float* x [[buffer(0)]]) {\n  threadgroup float a = 0;\n}\n",
			`f.metal:2: threadgroup variable "a": an initializer`},
		{"kernel void k(device float* x [[buffer(NOPE)]]) {\n}\n",
			`f.metal:1: parameter "device float* x": [[buffer(NOPE)]]: index "NOPE" is not an integer literal`},
		{"kernel void k(device float* x [[buffer(31)]]) {\n}\n",
			`f.metal:1: parameter "device float* x": index 31 out of range`},
		{"kernel float k(device float* x [[buffer(0)]]) {\n}\n",
			`f.metal:1: a kernel must return void`},
		{"template [[host_name(\"bad name\")]] kernel void k<float>(device float* x [[buffer(0)]]);\n",
			`f.metal:1: host_name "bad name" is not an identifier`},
		{"\n[[host_name(\"other\")]] kernel void k(device float* x [[buffer(0)]]) {\n}\n",
			`f.metal:2: host_name "other": the emulator supports host_name only on explicit template instantiations`},
		{"template <typename T>\nkernel void k(device T* x [[buffer(0)]], uint i [[thread_position_in_grid]]) {\n}\n\ntemplate [[host_name(\"k_f32\")]] kernel void k<float>(device float* x, uint i);\n",
			`f.metal:5: host_name "k_f32": kernel parameter "device float* x" has no [[buffer(n)]], [[threadgroup(n)]] or position attribute; an explicit instantiation that spells out its parameter list must repeat each parameter's attribute`},
	}
	for _, c := range cases {
		_, err := runPass("f.metal", c.src, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v\nwant an error containing %q", err, c.want)
		}
	}
	// An instantiation of something that is not a kernel template.
	res, err := runPass("f.metal", "template [[host_name(\"x\")]] kernel void nothing<float>(device float* p [[buffer(0)]]);\n", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := collectEntries("f.metal", res, nil); err == nil || !strings.Contains(err.Error(), "not a kernel template") {
		t.Errorf("got %v, want an error about the missing template", err)
	}
}

func TestDuplicateHostNames(t *testing.T) {
	src := "#include <metal_stdlib>\nkernel void k(device float* x [[buffer(0)]]) {\n}\n"
	_, err := Compile(map[string]string{"a.metal": src, "b.metal": src}, Options{})
	if err == nil || !strings.Contains(err.Error(), `b.metal:2: kernel name "k" is also defined at a.metal:2`) {
		t.Errorf("got %v", err)
	}
}
