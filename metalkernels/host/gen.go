package host

import (
	"fmt"
	"strings"
)

// genEntries writes the C entry points of one .metal file's kernels. Each
// entry takes no arguments: it reads the running fiber's arguments and
// position from the runner (emu::buf, emu::pos) and calls the kernel, so
// the runner can start any kernel the same way. A second function per
// kernel reports the least byte size each [[buffer(n)]] must have (the
// struct a constant reference names, or one element), for Dispatch's
// bounds check.
func genEntries(entries []entry) string {
	var b strings.Builder
	b.WriteString("\n#line 1 \"emu entry points\"\n")
	for _, e := range entries {
		var args []string
		for _, p := range e.params {
			switch p.Attr {
			case "buffer":
				args = append(args, fmt.Sprintf("::emu::buf(%d)", p.Index))
			case "threadgroup":
				args = append(args, fmt.Sprintf("::emu::tgbuf(%d)", p.Index))
			default:
				args = append(args, "::emu::pos(::emu::"+positionAttrs[p.Attr]+")")
			}
		}
		fmt.Fprintf(&b, "extern \"C\" __attribute__((visibility(\"default\"))) void emu_k_%s() { %s(%s); }\n",
			e.host, e.call, strings.Join(args, ", "))
		fmt.Fprintf(&b, "extern \"C\" __attribute__((visibility(\"default\"))) long long emu_ks_%s(int i) {\n", e.host)
		fmt.Fprintf(&b, "  using F = ::emu::fn_args<decltype(&%s)>;\n  switch (i) {\n", e.call)
		for pos, p := range e.params {
			if p.Attr == "buffer" {
				fmt.Fprintf(&b, "    case %d: return ::emu::min_size<F::at<%d>>();\n", p.Index, pos)
			}
		}
		b.WriteString("  }\n  return -1;\n}\n")
	}
	return b.String()
}

// collectEntries pairs a file's kernels and host_name instantiations with
// the kernel templates they instantiate (from this file or a header).
func collectEntries(file string, res *passResult, templates map[string]*kernelDef) ([]entry, error) {
	var out []entry
	for i := range res.kernels {
		k := &res.kernels[i]
		if k.template {
			continue
		}
		out = append(out, entry{host: k.name, call: k.name, params: k.params, file: file, line: k.line, maxThreads: k.maxThreads})
	}
	for _, in := range res.instances {
		t, ok := templates[in.name]
		if !ok {
			return nil, &SourceError{file, in.line, fmt.Sprintf("host_name %q instantiates %s, which is not a kernel template (kernel void %s(…) with [[buffer(n)]] parameters)", in.host, in.name, in.name)}
		}
		params := t.params
		if in.hasPar {
			if len(in.params) != len(t.params) {
				return nil, &SourceError{file, in.line, fmt.Sprintf("host_name %q: %d parameters, but kernel %s has %d", in.host, len(in.params), in.name, len(t.params))}
			}
			params = in.params
		}
		out = append(out, entry{host: in.host, call: in.name + in.args, params: params, file: file, line: in.line, maxThreads: t.maxThreads})
	}
	return out, nil
}
