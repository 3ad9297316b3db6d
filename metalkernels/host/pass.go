package host

import (
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The source pass turns one MSL file into C++ that the shim compiles, line
// for line: every line of the output is the same line of the input, so
// compiler messages (through a #line directive) name the .metal line.
//
// It blanks comments and string contents for its own analysis only (the
// output keeps them), and then:
//   - parses every [[…]] attribute and blanks it (the preprocessor would
//     otherwise expand macros such as threadgroup inside it, and C++
//     compilers warn about the unknown ones);
//   - finds kernels (`kernel void f(` / `[[kernel]] void f(`) with their
//     parameters and attributes, and explicit instantiations carrying
//     [[host_name("…")]];
//   - rewrites each threadgroup variable declared at the top level of a
//     kernel body into a reference to per-threadgroup storage
//     (emu::tg_var), and rejects threadgroup variables anywhere else;
//   - removes the address-space keywords device, constant, thread,
//     threadgroup and the kernel keyword (by blanking, not by macros, so
//     that nothing inside attributes or other headers is touched);
//   - rewrites half literals (1.0h) into half casts.

// SourceError is an error at a line of a .metal or header file.
type SourceError struct {
	File string
	Line int
	Msg  string
}

func (e *SourceError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// Param is one kernel parameter as the generator binds it.
type Param struct {
	Text  string // the declaration, for messages ("constant GemvParams& p")
	Attr  string // buffer, threadgroup, or a position attribute name
	Index int    // n of [[buffer(n)]] / [[threadgroup(n)]]
}

// kernelDef is a kernel function (template or not) found in a file.
type kernelDef struct {
	name     string
	template bool
	params   []Param
	file     string
	line     int
	body     [2]int // offsets of { and } of the body in the file
	// maxThreads is [[max_total_threads_per_threadgroup(n)]], 0 if absent.
	maxThreads int
}

// entry is one kernel the library exports: a host name and the C++
// expression that names the function to call.
type entry struct {
	host       string
	call       string // gemv<FmtF32> or rmsnorm_f32
	params     []Param
	file       string
	line       int
	maxThreads int
}

type attribute struct {
	start, end int // [start, end) covers [[ … ]]
	text       string
}

type passResult struct {
	out       string
	kernels   []kernelDef
	instances []instance
	defines   map[string]string
	edits     []edit
	tgDecl    map[int]bool
}

type instance struct {
	host   string
	name   string // function name
	args   string // <…> including brackets, or ""
	params []Param
	hasPar bool // the instantiation spells out its parameter list
	line   int
}

var positionAttrs = map[string]string{
	"thread_position_in_grid":             "kThreadPositionInGrid",
	"threadgroup_position_in_grid":        "kThreadgroupPositionInGrid",
	"thread_position_in_threadgroup":      "kThreadPositionInThreadgroup",
	"thread_index_in_threadgroup":         "kThreadIndexInThreadgroup",
	"threads_per_threadgroup":             "kThreadsPerThreadgroup",
	"dispatch_threads_per_threadgroup":    "kThreadsPerThreadgroup",
	"threadgroups_per_grid":               "kThreadgroupsPerGrid",
	"threads_per_grid":                    "kThreadsPerGrid",
	"grid_size":                           "kThreadsPerGrid",
	"simdgroup_index_in_threadgroup":      "kSimdgroupIndexInThreadgroup",
	"thread_index_in_simdgroup":           "kThreadIndexInSimdgroup",
	"simdgroups_per_threadgroup":          "kSimdgroupsPerThreadgroup",
	"dispatch_simdgroups_per_threadgroup": "kSimdgroupsPerThreadgroup",
	"threads_per_simdgroup":               "kThreadsPerSimdgroup",
	"thread_index_in_quadgroup":           "kThreadIndexInQuadgroup",
	"quadgroup_index_in_threadgroup":      "kQuadgroupIndexInThreadgroup",
}

// code returns a copy of src with comments, string and character literals
// replaced by spaces (newlines kept), so that scanning never matches inside
// them.
func code(src string) []byte {
	b := []byte(src)
	out := make([]byte, len(b))
	copy(out, b)
	for i := 0; i < len(b); {
		switch {
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				out[i] = ' '
				i++
			}
		case b[i] == '/' && i+1 < len(b) && b[i+1] == '*':
			for i < len(b) && !(b[i] == '*' && i+1 < len(b) && b[i+1] == '/') {
				if b[i] != '\n' {
					out[i] = ' '
				}
				i++
			}
			if i < len(b) {
				out[i], out[i+1] = ' ', ' '
				i += 2
			}
		case b[i] == '"' || b[i] == '\'':
			q := b[i]
			i++
			for i < len(b) && b[i] != q && b[i] != '\n' {
				if b[i] == '\\' && i+1 < len(b) {
					out[i] = ' '
					i++
				}
				out[i] = ' '
				i++
			}
			i++
		default:
			i++
		}
	}
	return out
}

func isIdent(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// words finds whole-word occurrences of w in c.
func words(c []byte, w string) []int {
	var at []int
	s := string(c)
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return at
		}
		p := i + j
		if (p == 0 || !isIdent(c[p-1])) && (p+len(w) >= len(c) || !isIdent(c[p+len(w)])) {
			at = append(at, p)
		}
		i = p + len(w)
	}
}

// match returns the offset of the bracket closing the one at open.
func match(c []byte, open int) int {
	o := c[open]
	var cl byte
	switch o {
	case '(':
		cl = ')'
	case '[':
		cl = ']'
	case '{':
		cl = '}'
	case '<':
		cl = '>'
	}
	depth := 0
	for i := open; i < len(c); i++ {
		switch c[i] {
		case o:
			depth++
		case cl:
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return -1
}

func lineOf(c []byte, off int) int { return 1 + strings.Count(string(c[:off]), "\n") }

func skipSpace(c []byte, i int) int {
	for i < len(c) && (c[i] == ' ' || c[i] == '\t' || c[i] == '\n' || c[i] == '\r') {
		i++
	}
	return i
}

func skipSpaceBack(c []byte, i int) int {
	for i >= 0 && (c[i] == ' ' || c[i] == '\t' || c[i] == '\n' || c[i] == '\r') {
		i--
	}
	return i
}

// blank replaces c[a:b] with spaces, keeping newlines.
func blank(b []byte, a, e int) {
	for i := a; i < e; i++ {
		if b[i] != '\n' {
			b[i] = ' '
		}
	}
}

var (
	defineRe     = regexp.MustCompile(`(?m)^[ \t]*#[ \t]*define[ \t]+([A-Za-z_][A-Za-z0-9_]*)[ \t]+(.*)$`)
	hostNameRe   = regexp.MustCompile(`^\s*host_name\s*\(\s*"([^"]*)"\s*\)\s*$`)
	indexRe      = regexp.MustCompile(`^\s*(buffer|threadgroup)\s*\(\s*([^)]*?)\s*\)\s*$`)
	halfLitRe    = regexp.MustCompile(`\b((?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?)[hH]\b`)
	identRe      = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	maxThreadsRe = regexp.MustCompile(`^\s*max_total_threads_per_threadgroup\s*\(\s*([^)]*?)\s*\)\s*$`)
)

// runPass processes one file. defines holds the integer #defines seen so far
// (from included headers), for attribute indices written as macros.
func runPass(file, src string, defines map[string]string) (*passResult, error) {
	return runPassKnown(file, src, defines, nil)
}

// runPassKnown is runPass with the signatures of the functions the
// project's headers define, so that the lint can check calls into them.
func runPassKnown(file, src string, defines map[string]string, known map[string][]funcSig) (*passResult, error) {
	c := code(src)
	out := []byte(src)
	res := &passResult{defines: map[string]string{}, tgDecl: map[int]bool{}}
	for k, v := range defines {
		res.defines[k] = v
	}
	for _, m := range defineRe.FindAllSubmatch(c, -1) {
		res.defines[string(m[1])] = strings.TrimSpace(string(m[2]))
	}

	attrs, err := findAttributes(file, src, c)
	if err != nil {
		return nil, err
	}
	attrAt := map[int]attribute{}
	for _, a := range attrs {
		attrAt[a.start] = a
	}
	// cw is the code with attributes blanked, for parsing declarations.
	cw := make([]byte, len(c))
	copy(cw, c)
	for _, a := range attrs {
		blank(cw, a.start, a.end)
	}

	// Kernels: the kernel keyword, or a [[kernel]] attribute, before a
	// return type and a name.
	var kernelStarts []int
	for _, p := range words(cw, "kernel") {
		kernelStarts = append(kernelStarts, p+len("kernel"))
	}
	for _, a := range attrs {
		if a.text == "kernel" {
			kernelStarts = append(kernelStarts, a.end)
		}
	}
	sort.Ints(kernelStarts)
	for _, p := range kernelStarts {
		if err := res.parseKernel(file, c, cw, attrs, p); err != nil {
			return nil, err
		}
	}

	// Explicit instantiations with host names.
	for _, a := range attrs {
		if m := hostNameRe.FindStringSubmatch(a.text); m != nil {
			inst, err := res.parseInstance(file, c, cw, attrs, a, m[1])
			if err != nil {
				return nil, err
			}
			res.instances = append(res.instances, inst)
		}
	}

	// What C++ would accept but Apple's compiler would not (lint.go).
	if err := lintSource(file, c, cw, res.kernels, res.instances, known); err != nil {
		return nil, err
	}

	// Threadgroup declarations and qualifiers.
	for _, p := range words(cw, "threadgroup") {
		if err := res.rewriteThreadgroup(file, cw, out, p); err != nil {
			return nil, err
		}
	}

	res.rewrite(src, cw, out, attrs)
	res.out = apply(out, res.edits)
	return res, nil
}

// findAttributes finds the [[ ]] attributes of src (c is its code, with
// comments and strings blanked).
func findAttributes(file, src string, c []byte) ([]attribute, error) {
	// Attributes.
	var attrs []attribute
	for i := 0; i+1 < len(c); i++ {
		if c[i] == '[' && c[i+1] == '[' {
			end := strings.Index(string(c[i:]), "]]")
			if end < 0 {
				return nil, &SourceError{file, lineOf(c, i), "unterminated [[ attribute"}
			}
			a := attribute{start: i, end: i + end + 2, text: strings.TrimSpace(src[i+2 : i+end])}
			attrs = append(attrs, a)
			i = a.end - 1
		}
	}
	return attrs, nil
}

// rewrite blanks in out what C++ does not know (attributes, address-space
// keywords, threadgroup qualifiers) and records the edits that make the
// rest C++: program-scope constants as static const, half literals cast.
func (res *passResult) rewrite(src string, cw, out []byte, attrs []attribute) {
	// Blank attributes and address-space keywords.
	for _, a := range attrs {
		blank(out, a.start, a.end)
	}
	for _, w := range []string{"device", "constant", "thread", "kernel"} {
		for _, p := range words(cw, w) {
			blank(out, p, p+len(w))
		}
	}
	// A program-scope constant variable becomes static const: blanked, it
	// would be a plain global defined again in every file that includes
	// its header, and the link would fail.
	depth := 0
	at := 0
	for _, p := range words(cw, "constant") {
		for ; at < p; at++ {
			switch cw[at] {
			case '{', '(', '[':
				depth++
			case '}', ')', ']':
				depth--
			}
		}
		if depth == 0 {
			res.edits = append(res.edits, edit{p, p + len("constant"), "static const"})
		}
	}
	for _, p := range words(cw, "threadgroup") {
		if !res.tgDecl[p] {
			blank(out, p, p+len("threadgroup"))
		}
	}

	// Half literals, only in code.
	for _, m := range halfLitRe.FindAllSubmatchIndex(cw, -1) {
		if m[0] > 0 && (isIdent(cw[m[0]-1]) || cw[m[0]-1] == '.') {
			continue
		}
		res.edits = append(res.edits, edit{m[0], m[1], "((half)" + src[m[2]:m[3]] + ")"})
	}
}

// parseParams splits a parameter list (between the parentheses at open and
// close) and reads each parameter's attribute.
func parseParams(file string, c []byte, attrs []attribute, open, close int, defines map[string]string) ([]Param, error) {
	var params []Param
	depth := 0
	start := open + 1
	flush := func(end int) error {
		text := strings.TrimSpace(string(c[start:end]))
		if text == "" || text == "void" {
			return nil
		}
		var found []attribute
		for _, a := range attrs {
			if a.start >= start && a.end <= end {
				found = append(found, a)
			}
		}
		decl := text
		if i := strings.Index(decl, "[["); i >= 0 {
			decl = strings.TrimSpace(decl[:i])
		}
		decl = strings.Join(strings.Fields(decl), " ")
		p := Param{Text: decl, Index: -1}
		for _, a := range found {
			if m := indexRe.FindStringSubmatch(a.text); m != nil {
				idx, err := evalInt(m[2], defines)
				if err != nil {
					return &SourceError{file, lineOf(c, a.start), fmt.Sprintf("parameter %q: [[%s]]: %v", decl, a.text, err)}
				}
				if idx < 0 || idx >= 31 {
					return &SourceError{file, lineOf(c, a.start), fmt.Sprintf("parameter %q: index %d out of range 0..30", decl, idx)}
				}
				p.Attr, p.Index = m[1], idx
			} else if _, ok := positionAttrs[a.text]; ok {
				p.Attr = a.text
			} else if a.text != "" {
				return &SourceError{file, lineOf(c, a.start), fmt.Sprintf("parameter %q: attribute [[%s]] is not supported by the emulator (see metalkernels/host/README.md)", decl, a.text)}
			}
		}
		if p.Attr == "" {
			return &SourceError{file, lineOf(c, start+1), fmt.Sprintf("kernel parameter %q has no [[buffer(n)]], [[threadgroup(n)]] or position attribute", decl)}
		}
		params = append(params, p)
		return nil
	}
	for i := open + 1; i < close; i++ {
		switch c[i] {
		case '(', '<', '[', '{':
			depth++
		case ')', '>', ']', '}':
			depth--
		case ',':
			if depth == 0 {
				if err := flush(i); err != nil {
					return nil, err
				}
				start = i + 1
			}
		}
	}
	if err := flush(close); err != nil {
		return nil, err
	}
	return params, nil
}

func evalInt(s string, defines map[string]string) (int, error) {
	for range 8 {
		s = strings.TrimSpace(s)
		s = strings.TrimSuffix(strings.TrimSuffix(s, "u"), "U")
		if n, err := strconv.ParseInt(s, 0, 32); err == nil {
			return int(n), nil
		}
		if strings.HasPrefix(s, "(") && strings.HasSuffix(s, ")") {
			s = s[1 : len(s)-1]
			continue
		}
		v, ok := defines[s]
		if !ok {
			break
		}
		s = v
	}
	return 0, fmt.Errorf("index %q is not an integer literal or a #define of one", s)
}

// parseKernel reads the kernel whose return type starts at p (just after
// the kernel keyword or [[kernel]]).
func (r *passResult) parseKernel(file string, c, cw []byte, attrs []attribute, p int) error {
	i := skipSpace(cw, p)
	// Return type: void (the only one MSL allows for kernels), or a
	// decltype(…) in the instantiation form, which parseInstance handles.
	if strings.HasPrefix(string(cw[i:]), "decltype") {
		return nil
	}
	if !strings.HasPrefix(string(cw[i:]), "void") {
		return &SourceError{file, lineOf(c, p), "a kernel must return void"}
	}
	i = skipSpace(cw, i+4)
	j := i
	for j < len(cw) && isIdent(cw[j]) {
		j++
	}
	name := string(cw[i:j])
	if name == "" {
		return &SourceError{file, lineOf(c, p), "cannot read the kernel's name"}
	}
	k := skipSpace(cw, j)
	if k < len(cw) && cw[k] == '<' {
		// An instantiation: template [[host_name]] kernel void f<T>(…);
		return nil
	}
	if k >= len(cw) || cw[k] != '(' {
		return &SourceError{file, lineOf(c, p), fmt.Sprintf("kernel %s: expected its parameter list", name)}
	}
	close := match(cw, k)
	if close < 0 {
		return &SourceError{file, lineOf(c, p), fmt.Sprintf("kernel %s: unbalanced parentheses", name)}
	}
	params, err := parseParams(file, c, attrs, k, close, r.defines)
	if err != nil {
		return err
	}
	b := skipSpace(cw, close+1)
	if b >= len(cw) || cw[b] != '{' {
		// A declaration or an instantiation without host_name: nothing to bind.
		return nil
	}
	end := match(cw, b)
	if end < 0 {
		return &SourceError{file, lineOf(c, b), fmt.Sprintf("kernel %s: unbalanced braces", name)}
	}
	// A template kernel has template<…> before the kernel keyword.
	before := strings.TrimSpace(string(cw[:p]))
	before = strings.TrimSuffix(before, "kernel")
	before = strings.TrimSpace(before)
	isTemplate := false
	if strings.HasSuffix(before, ">") {
		// Walk back over the balanced <…> and check for template.
		depth := 0
		for q := len(before) - 1; q >= 0; q-- {
			if before[q] == '>' {
				depth++
			} else if before[q] == '<' {
				depth--
				if depth == 0 {
					isTemplate = strings.HasSuffix(strings.TrimSpace(before[:q]), "template")
					break
				}
			}
		}
	}
	// Function attributes sit between the previous declaration and the
	// name.
	maxThreads := 0
	start := strings.LastIndexAny(string(cw[:p]), ";}") + 1
	for _, a := range attrs {
		if a.start < start || a.end > i {
			continue
		}
		if m := maxThreadsRe.FindStringSubmatch(a.text); m != nil {
			n, err := evalInt(m[1], r.defines)
			if err != nil || n < 1 || n > 1024 {
				return &SourceError{file, lineOf(c, a.start), fmt.Sprintf("kernel %s: [[%s]]: want 1 to 1024", name, a.text)}
			}
			maxThreads = n
		}
	}
	r.kernels = append(r.kernels, kernelDef{name: name, template: isTemplate, params: params, file: file,
		line: lineOf(c, p), body: [2]int{b, end}, maxThreads: maxThreads})
	return nil
}

// parseInstance reads `template [[host_name("x")]] … f<args>(…);` or
// `template [[host_name("x")]] [[kernel]] decltype(f<args>) f<args>;`.
func (r *passResult) parseInstance(file string, c, cw []byte, attrs []attribute, a attribute, host string) (instance, error) {
	line := lineOf(c, a.start)
	if before := strings.TrimSpace(string(cw[:a.start])); !strings.HasSuffix(before, "template") {
		return instance{}, &SourceError{file, line, fmt.Sprintf("host_name %q: the emulator supports host_name only on explicit template instantiations (template [[host_name(\"x\")]] kernel void f<T>(…);); name a plain kernel by its function name", host)}
	}
	if !identRe.MatchString(host) {
		return instance{}, &SourceError{file, line, fmt.Sprintf("host_name %q is not an identifier", host)}
	}
	end := strings.IndexByte(string(cw[a.end:]), ';')
	if end < 0 {
		return instance{}, &SourceError{file, line, fmt.Sprintf("host_name %q: no ';' ends the instantiation", host)}
	}
	end += a.end
	stmt := cw[a.end:end]
	inst := instance{host: host, line: line}
	// Skip decltype(…) so that the declarator found is the one after it.
	s := 0
	if d := strings.Index(string(stmt), "decltype"); d >= 0 {
		o := strings.IndexByte(string(stmt[d:]), '(')
		if o >= 0 {
			cl := match(stmt, d+o)
			if cl > 0 {
				s = cl + 1
			}
		}
	}
	// The declarator: the last identifier (with template arguments) before
	// the first top-level '(' after s, or before the end.
	stop := len(stmt)
	if o := strings.IndexByte(string(stmt[s:]), '('); o >= 0 {
		stop = s + o
	}
	q := skipSpaceBack(stmt, stop-1)
	args := ""
	if q >= 0 && stmt[q] == '>' {
		depth := 0
		for t := q; t >= 0; t-- {
			if stmt[t] == '>' {
				depth++
			} else if stmt[t] == '<' {
				depth--
				if depth == 0 {
					args = string(stmt[t : q+1])
					q = skipSpaceBack(stmt, t-1)
					break
				}
			}
		}
	}
	e := q + 1
	for q >= 0 && isIdent(stmt[q]) {
		q--
	}
	inst.name = string(stmt[q+1 : e])
	inst.args = strings.Join(strings.Fields(args), " ")
	if inst.name == "" {
		return instance{}, &SourceError{file, line, fmt.Sprintf("host_name %q: cannot read which function it instantiates", host)}
	}
	if stop < len(stmt) && s == 0 {
		open := a.end + stop
		cl := match(cw, open)
		if cl > 0 && cl < end {
			// An instantiation that spells out its parameters repeats
			// their attributes: Apple's compiler wants the full
			// declaration, attributes included, where g++ would take the
			// template's.
			params, err := parseParams(file, c, attrs, open, cl, r.defines)
			if err != nil {
				msg := err.Error()
				var se *SourceError
				if errors.As(err, &se) {
					msg = se.Msg
				}
				return instance{}, &SourceError{file, line, fmt.Sprintf("host_name %q: %s; an explicit instantiation that spells out its parameter list must repeat each parameter's attribute, as in the template (or write template [[host_name(\"%s\")]] [[kernel]] decltype(%s%s) %s%s;)", host, msg, host, inst.name, inst.args, inst.name, inst.args)}
			}
			inst.params, inst.hasPar = params, true
		}
	}
	return inst, nil
}

// rewriteThreadgroup handles the threadgroup keyword at p: a variable
// declaration at the top level of a kernel body becomes shared storage; a
// variable anywhere else is an error; a qualifier (pointers, references,
// casts, parameters) is left for blanking.
func (r *passResult) rewriteThreadgroup(file string, cw, out []byte, p int) error {
	// A declaration starts a statement: the previous code character is one
	// of ; { } or nothing.
	prev := skipSpaceBack(cw, p-1)
	if prev >= 0 && cw[prev] != ';' && cw[prev] != '{' && cw[prev] != '}' {
		return nil
	}
	// Statement up to ; at depth 0 (or a ')' closing an enclosing list, for
	// parameters that open a line).
	end := -1
	depth := 0
	for i := p; i < len(cw); i++ {
		switch cw[i] {
		case '(', '[', '{':
			depth++
		case ')', ']', '}':
			depth--
		}
		if depth < 0 {
			return nil
		}
		if depth == 0 && (cw[i] == ';' || cw[i] == ',' || cw[i] == '=') {
			end = i
			break
		}
	}
	if end < 0 {
		return nil
	}
	line := lineOf(cw, p)
	decl := strings.TrimSpace(string(cw[p+len("threadgroup") : end]))
	// Peel array dimensions off the end, then the name.
	dims := ""
	for strings.HasSuffix(decl, "]") {
		o := strings.LastIndexByte(decl, '[')
		if o < 0 {
			break
		}
		dims = decl[o:] + dims
		decl = strings.TrimSpace(decl[:o])
	}
	q := len(decl)
	for q > 0 && isIdent(decl[q-1]) {
		q--
	}
	name := decl[q:]
	typ := strings.TrimSpace(decl[:q])
	if strings.HasSuffix(typ, "*") || strings.HasSuffix(typ, "&") || typ == "" || name == "" {
		// A pointer or reference to threadgroup memory: an ordinary
		// per-thread variable.
		return nil
	}
	if cw[end] != ';' {
		what := "an initializer"
		if cw[end] == ',' {
			what = "several variables in one declaration"
		}
		return &SourceError{file, line, fmt.Sprintf("threadgroup variable %q: %s is not supported; declare one threadgroup variable per statement, without initializer", name, what)}
	}
	// Must be directly inside a kernel body.
	var inKernel *kernelDef
	for i := range r.kernels {
		k := &r.kernels[i]
		if p > k.body[0] && p < k.body[1] {
			inKernel = k
		}
	}
	if inKernel == nil {
		return &SourceError{file, line, fmt.Sprintf("threadgroup variable %q: declare threadgroup variables at the top level of a kernel function body (metalkernels/host/README.md, rule 1)", name)}
	}
	// Depth of braces between the kernel body's { and p must be zero.
	d := 0
	for i := inKernel.body[0] + 1; i < p; i++ {
		switch cw[i] {
		case '{':
			d++
		case '}':
			d--
		}
	}
	if d != 0 {
		return &SourceError{file, line, fmt.Sprintf("threadgroup variable %q: declared inside a block of kernel %s; declare threadgroup variables at the top level of the kernel body (metalkernels/host/README.md, rule 1)", name, inKernel.name)}
	}
	repl := fmt.Sprintf("auto& %s = ::emu::tg_var<%s%s>()", name, typ, dims)
	repl += strings.Repeat("\n", strings.Count(string(out[p:end]), "\n"))
	r.edits = append(r.edits, edit{p, end, repl})
	r.tgDecl[p] = true
	return nil
}

// edit replaces src[start:end] with text.
type edit struct {
	start, end int
	text       string
}

// apply applies non-overlapping edits to b.
func apply(b []byte, edits []edit) string {
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	var sb strings.Builder
	last := 0
	for _, e := range edits {
		if e.start < last {
			continue
		}
		sb.Write(b[last:e.start])
		sb.WriteString(e.text)
		last = e.end
	}
	sb.Write(b[last:])
	return sb.String()
}
