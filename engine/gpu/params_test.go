package gpu

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"unicode"

	"github.com/suzuran-app/suzuran/metalkernels"
)

// goParamStructs are the Go twins of the MSL parameter structs; the test
// also checks that no other *Params struct of this package is missing here.
var goParamStructs = []any{
	gemvParams{}, gemmParams{}, embedParams{}, embedSeqsParams{}, copyParams{}, normParams{}, convParams{},
	deltaNetParams{}, attnParams{}, routerParams{}, expertParams{}, planParams{},
	scatterParams{}, groupedParams{}, combineParams{}, argmaxParams{}, penaltyParams{},
	topKParams{}, visionRowParams{}, ropeTableParams{}, visionAttnParams{},
}

// mslField is one field of an MSL struct as laid out by the C++ rules the
// Metal compiler follows: each scalar at the next multiple of its size.
type mslField struct {
	name, typ    string
	offset, size uintptr
}

type mslStruct struct {
	file   string
	fields []mslField
	size   uintptr
}

// mslScalars are the field types a parameter struct may use, with their
// sizes in MSL, and the Go kind each must be mirrored by.
var mslScalars = map[string]struct {
	size uintptr
	kind reflect.Kind
}{
	"uint":   {4, reflect.Uint32},
	"int":    {4, reflect.Int32},
	"float":  {4, reflect.Float32},
	"ushort": {2, reflect.Uint16},
	"short":  {2, reflect.Int16},
	"uchar":  {1, reflect.Uint8},
	"char":   {1, reflect.Int8},
}

var (
	mslStructRE  = regexp.MustCompile(`(?s)\bstruct\s+(\w+Params)\s*\{(.*?)\};`)
	mslCommentRE = regexp.MustCompile(`(?s)//[^\n]*|/\*.*?\*/`)
	mslFieldRE   = regexp.MustCompile(`^(\w+)\s+(\w+(?:\s*,\s*\w+)*)$`)
)

// parseMSLParams reads every struct named *Params from the kernel sources.
func parseMSLParams(t *testing.T, sources map[string]string) map[string]mslStruct {
	t.Helper()
	out := map[string]mslStruct{}
	for file, src := range sources {
		for _, m := range mslStructRE.FindAllStringSubmatch(src, -1) {
			name, body := m[1], mslCommentRE.ReplaceAllString(m[2], "")
			if prev, ok := out[name]; ok {
				t.Errorf("struct %s is defined in both %s and %s: a parameter struct needs one definition", name, prev.file, file)
				continue
			}
			s := mslStruct{file: file}
			var align uintptr = 1
			for _, decl := range strings.Split(body, ";") {
				decl = strings.TrimSpace(decl)
				if decl == "" {
					continue
				}
				fm := mslFieldRE.FindStringSubmatch(decl)
				if fm == nil {
					t.Errorf("%s: struct %s: cannot read field %q (parameter structs hold scalar fields only)", file, name, decl)
					continue
				}
				scalar, ok := mslScalars[fm[1]]
				if !ok {
					t.Errorf("%s: struct %s: field type %q is not a scalar this test knows", file, name, fm[1])
					continue
				}
				for _, field := range strings.Split(fm[2], ",") {
					off := (s.size + scalar.size - 1) / scalar.size * scalar.size
					s.fields = append(s.fields, mslField{name: strings.TrimSpace(field), typ: fm[1], offset: off, size: scalar.size})
					s.size = off + scalar.size
					align = max(align, scalar.size)
				}
			}
			s.size = (s.size + align - 1) / align * align
			out[name] = s
		}
	}
	return out
}

// camel turns an MSL snake_case name into the Go field name: x_stride →
// XStride.
func camel(s string) string {
	var b strings.Builder
	for _, part := range strings.Split(s, "_") {
		if part == "" {
			continue
		}
		r := []rune(part)
		r[0] = unicode.ToUpper(r[0])
		b.WriteString(string(r))
	}
	return b.String()
}

// TestParamsMatchMSL checks every Go parameter struct against the MSL struct
// it mirrors: the same fields in the same order, with the same types, at the
// same offsets, and the same size; and every MSL *Params struct has a twin.
// A field added to a .metal struct but not here would shift every later
// field the kernel reads.
func TestParamsMatchMSL(t *testing.T) {
	msl := parseMSLParams(t, metalkernels.Sources())
	if len(msl) < len(goParamStructs) {
		t.Fatalf("found %d MSL parameter structs, fewer than the %d Go ones: the parser misses definitions", len(msl), len(goParamStructs))
	}
	seen := map[string]bool{}
	for _, v := range goParamStructs {
		gt := reflect.TypeOf(v)
		name := camel(gt.Name())
		seen[name] = true
		ms, ok := msl[name]
		if !ok {
			t.Errorf("Go struct %s has no MSL struct %s in metalkernels/*.metal", gt.Name(), name)
			continue
		}
		for _, problem := range compareParams(gt, ms) {
			t.Errorf("%s (%s in %s): %s", gt.Name(), name, ms.file, problem)
		}
		if got := len(pack(v)); uintptr(got) != ms.size {
			t.Errorf("pack(%s) gives %d bytes, the kernel reads %d", gt.Name(), got, ms.size)
		}
	}
	var missing []string
	for name, ms := range msl {
		if !seen[name] {
			missing = append(missing, name+" ("+ms.file+")")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("MSL parameter structs without a Go twin in goParamStructs: %s", strings.Join(missing, ", "))
	}
	// Every *Params struct declared in this package's Go files is listed
	// above, so none escapes the check.
	listed := map[string]bool{}
	for _, v := range goParamStructs {
		listed[reflect.TypeOf(v).Name()] = true
	}
	for _, name := range goParamTypes(t) {
		if !listed[name] {
			t.Errorf("Go struct %s is not in goParamStructs, so its layout is not checked", name)
		}
	}
}

// compareParams lists the differences between a Go parameter struct and
// the MSL struct it mirrors.
func compareParams(gt reflect.Type, ms mslStruct) []string {
	var out []string
	if gt.NumField() != len(ms.fields) {
		out = append(out, fmt.Sprintf("Go has %d fields, MSL %d", gt.NumField(), len(ms.fields)))
	}
	for i := 0; i < min(gt.NumField(), len(ms.fields)); i++ {
		gf, mf := gt.Field(i), ms.fields[i]
		if gf.Name != camel(mf.name) {
			out = append(out, fmt.Sprintf("field %d: Go %s, MSL %s wants %s", i, gf.Name, mf.name, camel(mf.name)))
		}
		if want := mslScalars[mf.typ].kind; gf.Type.Kind() != want {
			out = append(out, fmt.Sprintf("field %s: Go %s, MSL %s wants %s", gf.Name, gf.Type.Kind(), mf.typ, want))
		}
		if gf.Offset != mf.offset || gf.Type.Size() != mf.size {
			out = append(out, fmt.Sprintf("field %s: Go offset %d size %d, MSL offset %d size %d",
				gf.Name, gf.Offset, gf.Type.Size(), mf.offset, mf.size))
		}
	}
	if gt.Size() != ms.size {
		out = append(out, fmt.Sprintf("Go size %d, MSL size %d", gt.Size(), ms.size))
	}
	return out
}

// goParamTypes lists the struct types named *Params in the package's
// non-test Go files.
func goParamTypes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(af, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && strings.HasSuffix(ts.Name.Name, "Params") {
					names = append(names, ts.Name.Name)
				}
			}
			return true
		})
	}
	return names
}

// TestParamsParserCatchesDrift feeds the parser a struct that differs from
// its Go twin in each way the real check must catch, so the check above
// cannot pass by reading nothing.
func TestParamsParserCatchesDrift(t *testing.T) {
	cases := []struct {
		name, src string
		want      []mslField
		size      uintptr
	}{
		{"scalars with comments", "struct AParams {\n  uint in;   // K\n  float eps; /* x */\n};",
			[]mslField{{"in", "uint", 0, 4}, {"eps", "float", 4, 4}}, 8},
		{"a list and padding", "struct BParams { ushort a, b; uchar c; uint d; };",
			[]mslField{{"a", "ushort", 0, 2}, {"b", "ushort", 2, 2}, {"c", "uchar", 4, 1}, {"d", "uint", 8, 4}}, 12},
		{"tail padding", "struct CParams { uint a; ushort b; };",
			[]mslField{{"a", "uint", 0, 4}, {"b", "ushort", 4, 2}}, 8},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := parseMSLParams(t, map[string]string{"x.metal": c.src})
			if len(got) != 1 {
				t.Fatalf("parsed %d structs, want 1", len(got))
			}
			for _, s := range got {
				if !reflect.DeepEqual(s.fields, c.want) || s.size != c.size {
					t.Errorf("parsed %+v size %d, want %+v size %d", s.fields, s.size, c.want, c.size)
				}
			}
		})
	}
	// normParams against edited copies of NormParams: each edit is caught.
	drift := []struct{ name, src string }{
		{"a field added", "struct NormParams { uint width; uint x_stride; uint y_stride; float eps; uint flags; };"},
		{"two fields swapped", "struct NormParams { uint x_stride; uint width; uint y_stride; float eps; };"},
		{"a type changed", "struct NormParams { uint width; uint x_stride; uint y_stride; uint eps; };"},
		{"a field narrowed", "struct NormParams { uint width; ushort x_stride; uint y_stride; float eps; };"},
	}
	for _, d := range drift {
		ms := parseMSLParams(t, map[string]string{"norm.metal": d.src})["NormParams"]
		if len(compareParams(reflect.TypeOf(normParams{}), ms)) == 0 {
			t.Errorf("%s: compareParams finds no difference", d.name)
		}
	}
	exact := parseMSLParams(t, map[string]string{"norm.metal": "struct NormParams { uint width; uint x_stride; uint y_stride; float eps; };"})
	if p := compareParams(reflect.TypeOf(normParams{}), exact["NormParams"]); len(p) > 0 {
		t.Errorf("the unchanged struct differs: %v", p)
	}
	if camel("x_stride") != "XStride" || camel("pos0") != "Pos0" || camel("shared_group_size") != "SharedGroupSize" {
		t.Error("camel does not map MSL names to Go names")
	}
}
