// Command gen writes frontend/src/lib/gen/service.ts, the TypeScript face
// of app/service: an interface for every exported method of service.UI
// (the calls Wails binds and the HTTP transport serves), an interface for
// every Go struct those methods and service.Event carry, and the constants
// the UI compares with. Run it from the repository root after changing
// those types:
//
//	go run ./app/service/gen
//
// Types and method signatures come from the compiled Go types by reflection
// (the same view Wails and encoding/json have of them: JSON names,
// omitempty); parameter names and doc comments from the package's source.
// Its test fails when the committed file differs from what it writes.
package main

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/app/service"
	"github.com/suzuran-app/suzuran/app/store"
)

// Output is the generated file, relative to the repository root.
const Output = "frontend/src/lib/gen/service.ts"

// constantGroups are the string constants the UI needs, by TypeScript name.
var constantGroups = []struct {
	name, doc string
	values    []namedValue
}{
	{"EventType", "Event.type values.", []namedValue{
		{"Reply", service.EventReply}, {"Prefill", service.EventPrefill}, {"Message", service.EventMessage},
		{"Conversations", service.EventConversations}, {"Model", service.EventModel},
		{"API", service.EventAPI}, {"Settings", service.EventSettings}, {"Download", service.EventDownload}, {"Attachment", service.EventAttachment},
	}},
	{"DownloadStateName", "DownloadState.state values.", []namedValue{
		{"Idle", service.DownloadIdle}, {"Downloading", service.DownloadRunning}, {"Paused", service.DownloadPaused},
		{"Verifying", service.DownloadVerifying}, {"Done", service.DownloadDone}, {"Error", service.DownloadFailed},
	}},
	{"MessageStatus", "Message.status values.", []namedValue{
		{"Complete", store.StatusComplete}, {"Streaming", store.StatusStreaming}, {"Stopped", store.StatusStopped},
		{"Interrupted", store.StatusInterrupted}, {"Error", store.StatusError},
	}},
	{"ModelStateName", "ModelState.state values.", []namedValue{
		{"Loading", modelhost.StateLoading}, {"Ready", modelhost.StateReady}, {"Error", modelhost.StateError}, {"Unloaded", modelhost.StateUnloaded},
	}},
	{"SamplingPreset", "Settings.sampling_preset values.", []namedValue{
		{"Auto", service.PresetAuto}, {"Thinking", service.PresetThinking}, {"NonThinking", service.PresetNonThinking},
		{"Coding", service.PresetCoding}, {"Custom", service.PresetCustom},
	}}, {"AttachmentState", "AttachmentView.state values.", []namedValue{
		{"Reading", service.AttachmentReading}, {"Ready", service.AttachmentReady}, {"Failed", service.AttachmentFailed},
	}},
	{"Keep", "SendRequest.keep values: which part of documents too long for the context is kept.", []namedValue{
		{"Beginning", service.KeepBeginning}, {"End", service.KeepEnd},
	}},
}

type namedValue struct{ name, value string }

func main() {
	out, err := Generate(".")
	if err == nil {
		err = os.WriteFile(Output, out, 0o644)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

// docs holds the doc comments and parameter names read from source.
type docs struct {
	types   map[string]string   // "service.Settings" → doc
	methods map[string]string   // UI method → doc
	params  map[string][]string // UI method → parameter names
}

func readDocs(root string) (docs, error) {
	d := docs{types: map[string]string{}, methods: map[string]string{}, params: map[string][]string{}}
	for _, pkg := range []string{"app/service", "app/store", "app/modelhost"} {
		fset := token.NewFileSet()
		files, _ := filepath.Glob(filepath.Join(root, pkg, "*.go"))
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
			if err != nil {
				return d, err
			}
			prefix := f.Name.Name + "."
			for _, decl := range f.Decls {
				switch decl := decl.(type) {
				case *ast.GenDecl:
					for _, spec := range decl.Specs {
						ts, ok := spec.(*ast.TypeSpec)
						if !ok {
							continue
						}
						doc := ts.Doc.Text()
						if doc == "" {
							doc = decl.Doc.Text()
						}
						d.types[prefix+ts.Name.Name] = doc
					}
				case *ast.FuncDecl:
					if decl.Recv == nil || len(decl.Recv.List) != 1 || !isUIReceiver(decl.Recv.List[0].Type) {
						continue
					}
					d.methods[decl.Name.Name] = decl.Doc.Text()
					var names []string
					for _, field := range decl.Type.Params.List {
						for _, n := range field.Names {
							names = append(names, n.Name)
						}
					}
					d.params[decl.Name.Name] = names
				}
			}
		}
	}
	return d, nil
}

func isUIReceiver(e ast.Expr) bool {
	star, ok := e.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "UI"
}

// Generate returns the file's content; root is the repository root.
func Generate(root string) ([]byte, error) {
	d, err := readDocs(root)
	if err != nil {
		return nil, err
	}
	g := &generator{docs: d, seen: map[reflect.Type]bool{}}
	var methods bytes.Buffer
	ui := reflect.TypeFor[*service.UI]()
	var names []string
	for i := range ui.NumMethod() {
		m := ui.Method(i)
		names = append(names, m.Name)
		params := d.params[m.Name]
		if len(params) != m.Type.NumIn()-1 {
			return nil, fmt.Errorf("UI.%s: %d parameter names in source for %d parameters", m.Name, len(params), m.Type.NumIn()-1)
		}
		var args []string
		for j := 1; j < m.Type.NumIn(); j++ {
			args = append(args, params[j-1]+": "+g.ts(m.Type.In(j)))
		}
		result := "void"
		for j := range m.Type.NumOut() {
			if out := m.Type.Out(j); out != reflect.TypeFor[error]() {
				result = g.ts(out)
			}
		}
		writeDoc(&methods, d.methods[m.Name], "  ")
		fmt.Fprintf(&methods, "  %s(%s): Promise<%s>;\n", m.Name, strings.Join(args, ", "), result)
	}
	g.ts(reflect.TypeFor[service.Event]())

	var b bytes.Buffer
	b.WriteString("// Code generated by `go run ./app/service/gen`; DO NOT EDIT.\n")
	b.WriteString("// The TypeScript face of app/service: its UI calls, the types they carry, and its constants.\n\n")
	for _, c := range constantGroups {
		fmt.Fprintf(&b, "/** %s */\nexport const %s = {\n", c.doc, c.name)
		for _, v := range c.values {
			fmt.Fprintf(&b, "  %s: %q,\n", v.name, v.value)
		}
		fmt.Fprintf(&b, "} as const;\n\n")
	}
	b.WriteString("/** The largest file the window uploads (AttachData), in bytes: its base64 fits in the API server's body limit. */\n")
	fmt.Fprintf(&b, "export const MaxUploadBytes = %d;\n\n", service.MaxUploadBytes)
	sort.Slice(g.structs, func(i, j int) bool { return g.structs[i].name < g.structs[j].name })
	for _, s := range g.structs {
		b.WriteString(s.body)
		b.WriteString("\n")
	}
	writeDoc(&b, d.types["service.UI"], "")
	b.WriteString("export interface UI {\n")
	b.Write(methods.Bytes())
	b.WriteString("}\n\n/** The names of UI's methods, for transports that call them by name. */\n")
	fmt.Fprintf(&b, "export const UIMethods = [%s] as const;\n", quoteAll(names))
	return b.Bytes(), nil
}

type generator struct {
	docs    docs
	seen    map[reflect.Type]bool
	structs []struct{ name, body string }
}

// ts is t's TypeScript type, generating interfaces for structs on the way.
func (g *generator) ts(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice:
		return g.ts(t.Elem()) + "[]"
	case reflect.Pointer:
		return g.ts(t.Elem()) + " | null"
	case reflect.Struct:
		g.structType(t)
		return t.Name()
	}
	panic(fmt.Sprintf("gen: no TypeScript type for %s", t))
}

func (g *generator) structType(t reflect.Type) {
	if g.seen[t] {
		return
	}
	g.seen[t] = true
	if slices.ContainsFunc(g.structs, func(s struct{ name, body string }) bool { return s.name == t.Name() }) {
		panic(fmt.Sprintf("gen: two Go types named %s", t.Name()))
	}
	var b bytes.Buffer
	pkg := filepath.Base(t.PkgPath())
	writeDoc(&b, g.docs.types[pkg+"."+t.Name()], "")
	fmt.Fprintf(&b, "export interface %s {\n", t.Name())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		typ := g.ts(f.Type)
		optional := strings.Contains(opts, "omitempty")
		if optional && f.Type.Kind() == reflect.Pointer {
			typ = g.ts(f.Type.Elem())
		}
		mark := ""
		if optional {
			mark = "?"
		}
		fmt.Fprintf(&b, "  %s%s: %s;\n", name, mark, typ)
	}
	b.WriteString("}\n")
	g.structs = append(g.structs, struct{ name, body string }{t.Name(), b.String()})
}

func writeDoc(b *bytes.Buffer, doc, indent string) {
	doc = strings.TrimSpace(doc)
	if doc == "" {
		return
	}
	fmt.Fprintf(b, "%s/**\n", indent)
	for _, line := range strings.Split(doc, "\n") {
		fmt.Fprintf(b, "%s * %s\n", indent, strings.TrimRight(line, " "))
	}
	fmt.Fprintf(b, "%s */\n", indent)
}

func quoteAll(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	return strings.Join(q, ", ")
}
