package metal

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/metalkernels"
)

var lineDirective = regexp.MustCompile(`^#line (\d+) "([^"]+)"$`)

// checkLineMap replays the #line directives of a unit the way the compiler
// does and checks that every other line is the line of the original file it
// claims to be, so compiler messages point at the right place.
func checkLineMap(t *testing.T, sources map[string]string, prefix string, u Unit) {
	t.Helper()
	file, line := "", 0
	for _, text := range strings.Split(u.Text, "\n") {
		if m := lineDirective.FindStringSubmatch(text); m != nil {
			n, _ := strconv.Atoi(m[1])
			file, line = m[2], n
			continue
		}
		if file == "" {
			t.Fatalf("%s: text before the first #line directive: %q", u.Name, text)
		}
		name, ok := strings.CutPrefix(file, prefix)
		if !ok {
			t.Fatalf("%s: #line names %q, without the prefix %q", u.Name, file, prefix)
		}
		orig := strings.Split(sources[name], "\n")
		if line < 1 || line > len(orig) {
			t.Fatalf("%s: claims %s:%d, which has %d lines", u.Name, file, line, len(orig))
		}
		want := orig[line-1]
		if pragmaOnce.MatchString(want) {
			want = ""
		}
		if text != want {
			t.Fatalf("%s: line claimed as %s:%d is %q, the file has %q", u.Name, file, line, text, want)
		}
		line++
	}
}

func TestTranslationUnitsExpandsHeadersOncePerUnit(t *testing.T) {
	sources := map[string]string{
		"common.h":   "#pragma once\n#include \"types.h\"\ninline float twice(float x) { return 2 * x; }",
		"types.h":    "#pragma once\nstruct P { uint n; };",
		"a.metal":    "#include \"common.h\"\n#include \"types.h\"\n#include \"common.h\"\nkernel void a_k() {}\n",
		"b.metal":    "// b\n#include <metal_stdlib>\n#include \"types.h\"\nkernel void b_k() {}",
		"README.txt": "not a kernel",
	}
	units, err := TranslationUnits(sources, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(units) != 2 || units[0].Name != "a.metal" || units[1].Name != "b.metal" {
		t.Fatalf("units %v, want a.metal and b.metal in order", units)
	}
	for _, u := range units {
		for _, line := range strings.Split(u.Text, "\n") {
			if includeLine.MatchString(line) {
				t.Errorf("%s still has a project include: %s", u.Name, line)
			}
		}
		checkLineMap(t, sources, "", u)
	}
	// Each header appears exactly once in a.metal despite three inclusions.
	if n := strings.Count(units[0].Text, "struct P {"); n != 1 {
		t.Errorf("a.metal has types.h %d times, want 1:\n%s", n, units[0].Text)
	}
	if n := strings.Count(units[0].Text, "inline float twice"); n != 1 {
		t.Errorf("a.metal has common.h %d times, want 1", n)
	}
	// Units are independent: b.metal gets its own copy of types.h.
	if !strings.Contains(units[1].Text, "struct P {") || !strings.Contains(units[1].Text, "#include <metal_stdlib>") {
		t.Errorf("b.metal lacks types.h or its system include:\n%s", units[1].Text)
	}
}

func TestTranslationUnitsErrors(t *testing.T) {
	cases := []struct {
		name    string
		sources map[string]string
		want    string
	}{
		{"missing header", map[string]string{"k.metal": "// x\n#include \"nope.h\"\n"}, `k.metal:2: #include "nope.h"`},
		{"no kernels", map[string]string{"common.h": "x"}, "no .metal files"},
	}
	for _, c := range cases {
		_, err := TranslationUnits(c.sources, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want one containing %q", c.name, err, c.want)
		}
	}
}

// Headers that include each other expand once each, as with #pragma once.
func TestTranslationUnitsMutualIncludes(t *testing.T) {
	sources := map[string]string{
		"k.metal": "#include \"a.h\"\nkernel void k() {}",
		"a.h":     "#pragma once\n#include \"b.h\"\nstruct A {};",
		"b.h":     "#pragma once\n#include \"a.h\"\nstruct B {};",
	}
	units, err := TranslationUnits(sources, "")
	if err != nil {
		t.Fatal(err)
	}
	u := units[0]
	if strings.Count(u.Text, "struct A {};") != 1 || strings.Count(u.Text, "struct B {};") != 1 {
		t.Fatalf("want each header once:\n%s", u.Text)
	}
	checkLineMap(t, sources, "", u)
}

// The project's own kernels, as embedded in the binary, expand cleanly and
// keep their line numbers under the repository path.
func TestTranslationUnitsOfProjectKernels(t *testing.T) {
	sources := metalkernels.Sources()
	units, err := TranslationUnits(sources, "metalkernels/")
	if err != nil {
		t.Fatal(err)
	}
	if len(units) == 0 {
		t.Fatal("no units from the embedded kernels")
	}
	for _, u := range units {
		for _, line := range strings.Split(u.Text, "\n") {
			if includeLine.MatchString(line) {
				t.Errorf("%s still has a project include: %s", u.Name, line)
			}
		}
		checkLineMap(t, sources, "metalkernels/", u)
	}
}
