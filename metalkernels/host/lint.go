package host

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The lint rejects MSL that the C++ compiler behind the emulator would
// accept but Apple's Metal compiler (MSL 3.1) would not. The shim maps the
// address spaces to nothing and supplies Metal's types, so without these
// checks a kernel could pass every emulator test and still fail to build
// on a Mac, where newLibraryWithSource is the first to see it. Each finding
// names the .metal (or header) line.
//
// It works on tokens of the code with comments, strings, attributes and
// preprocessor lines blanked, and knows only what it can see in one file:
// a typedef that hides an address space, for instance, is taken on trust.
// What it checks:
//   - pointers and references carry an address space (device, constant,
//     thread, threadgroup, …) in function parameters, declarations of
//     variables and members, and casts: MSL has no generic address space
//     ("pointer type must have explicit address space qualifier");
//   - no double (Apple GPUs have no 64-bit float), no std:: (MSL has its own
//     library), none of the C++ features MSL lacks (goto, exceptions,
//     virtual, new/delete, dynamic_cast, typeid, noexcept, register,
//     thread_local, derived classes, and lambdas, which arrive only in MSL
//     3.2);
//   - static and program-scope variables are in the constant address space;
//   - no INFINITY, NAN, isnan, isinf, …: Metal compiles with fast math;
//   - kernel position attributes have the types MSL allows: ushort or uint
//     (vectors of up to 3 where the attribute has components), and the
//     grid-shaped ones agree on their component count;
//   - calls to the project's functions, pointer and reference initializers
//     and casts do not move memory between address spaces, where the
//     declarations in the function show the spaces (calls);
//   - #include resolves as on the Metal device (lintIncludes).

var addressSpaces = map[string]bool{
	"device": true, "constant": true, "thread": true, "threadgroup": true,
	"threadgroup_imageblock": true, "ray_data": true, "object_data": true,
}

// unsupported maps C++ keywords MSL 3.1 rejects to the reason.
var unsupported = map[string]string{
	"double":       "Apple GPUs have no double; use float",
	"goto":         "MSL has no goto",
	"throw":        "MSL has no exceptions",
	"try":          "MSL has no exceptions",
	"catch":        "MSL has no exceptions",
	"virtual":      "MSL has no virtual functions",
	"new":          "MSL has no new or delete",
	"dynamic_cast": "MSL has no dynamic_cast",
	"typeid":       "MSL has no typeid",
	"noexcept":     "MSL has no noexcept",
	"register":     "MSL has no register storage class",
	"thread_local": "MSL has no thread_local",
}

// fastMathUnsafe are the names whose meaning Metal's default fast math
// takes away: the compiler assumes no value is infinite or NaN, so a -INFINITY
// sentinel's comparisons and isnan tests may fold to constants. The emulator
// computes IEEE single precision and would not show it.
var fastMathUnsafe = map[string]bool{
	"INFINITY": true, "NAN": true, "HUGE_VALF": true,
	"isnan": true, "isinf": true, "isfinite": true, "isnormal": true,
}

// notNames are keywords that may precede '(' without naming a function.
var notNames = map[string]bool{
	"if": true, "for": true, "while": true, "switch": true, "return": true, "sizeof": true,
	"alignof": true, "decltype": true, "static_assert": true, "catch": true, "case": true,
	"else": true, "do": true, "template": true, "typename": true, "static_cast": true,
	"reinterpret_cast": true, "const_cast": true, "as_type": true, "defined": true,
}

type token struct {
	text string
	off  int
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// tokenize splits code (comments, strings and attributes already blanked)
// into identifiers, numbers and punctuators, skipping preprocessor lines.
func tokenize(cw []byte) []token {
	b := make([]byte, len(cw))
	copy(b, cw)
	// Blank preprocessor directives, with their continuation lines.
	lineStart := true
	for i := 0; i < len(b); i++ {
		if b[i] == '\n' {
			lineStart = true
			continue
		}
		if lineStart && (b[i] == ' ' || b[i] == '\t') {
			continue
		}
		if lineStart && b[i] == '#' {
			for i < len(b) {
				if b[i] == '\n' {
					if i > 0 && b[i-1] == '\\' {
						i++
						continue
					}
					break
				}
				b[i] = ' '
				i++
			}
			lineStart = true
			continue
		}
		lineStart = false
	}
	three := []string{"<<=", ">>=", "..."}
	two := []string{"::", "->", "&&", "||", "<<", ">>", "<=", ">=", "==", "!=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "++", "--"}
	var toks []token
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case isIdentStart(c):
			j := i
			for j < len(b) && isIdent(b[j]) {
				j++
			}
			toks = append(toks, token{string(b[i:j]), i})
			i = j
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(b) && b[i+1] >= '0' && b[i+1] <= '9':
			j := i
			for j < len(b) && (isIdent(b[j]) || b[j] == '.' || (b[j] == '+' || b[j] == '-') && (b[j-1] == 'e' || b[j-1] == 'E' || b[j-1] == 'p' || b[j-1] == 'P')) {
				j++
			}
			toks = append(toks, token{string(b[i:j]), i})
			i = j
		default:
			n := 1
			for _, p := range three {
				if strings.HasPrefix(string(b[i:min(i+3, len(b))]), p) {
					n = 3
				}
			}
			if n == 1 {
				for _, p := range two {
					if strings.HasPrefix(string(b[i:min(i+2, len(b))]), p) {
						n = 2
					}
				}
			}
			toks = append(toks, token{string(b[i : i+n]), i})
			i += n
		}
	}
	return toks
}

func isIdentTok(s string) bool { return s != "" && isIdentStart(s[0]) }

// scope kinds of a brace.
const (
	scopeNamespace = iota
	scopeAggregate
	scopeCode
	scopeInit
)

type linter struct {
	file string
	c    []byte
	toks []token
	errs []error
	seen map[string]bool
	defs []funcDef // function definitions, in order
}

// funcDef is a function definition: its name, the parentheses of its
// parameter list and the braces of its body (token indices).
type funcDef struct {
	name        string
	open, close int
	body        [2]int
}

func (l *linter) errorf(off int, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	line := lineOf(l.c, off)
	key := fmt.Sprintf("%d:%s", line, msg)
	if l.seen[key] {
		return
	}
	l.seen[key] = true
	l.errs = append(l.errs, &SourceError{l.file, line, msg})
}

func (l *linter) tok(i int) string {
	if i < 0 || i >= len(l.toks) {
		return ""
	}
	return l.toks[i].text
}

// closeOf returns the index of the token closing the bracket at open.
func (l *linter) closeOf(open int) int {
	o := l.toks[open].text
	cl := map[string]string{"(": ")", "[": "]", "{": "}", "<": ">"}[o]
	depth := 0
	for i := open; i < len(l.toks); i++ {
		switch l.toks[i].text {
		case o:
			depth++
		case cl:
			depth--
			if depth == 0 {
				return i
			}
		case ">>":
			if o == "<" {
				depth -= 2
				if depth <= 0 {
					return i
				}
			}
		case ";", "{", "}":
			if o == "<" {
				return -1
			}
		}
	}
	return -1
}

// hasAddressSpace reports whether toks[a:b] names an address space.
func (l *linter) hasAddressSpace(a, b int) bool {
	for i := a; i < b; i++ {
		if addressSpaces[l.toks[i].text] {
			return true
		}
	}
	return false
}

// lintSource runs every check on one file. cw is the code with comments,
// strings and attributes blanked; kernels are the file's kernels as the
// pass parsed them, instances its host_name instantiations.
// known holds the signatures of functions defined in the project's headers,
// for calls from this file into them.
func lintSource(file string, c, cw []byte, kernels []kernelDef, instances []instance, known map[string][]funcSig) error {
	l := &linter{file: file, c: c, toks: tokenize(cw), seen: map[string]bool{}}
	scopes := l.scopes()
	l.keywords()
	l.lambdas()
	l.casts()
	l.functions(scopes)
	l.declarations(scopes)
	l.calls(known)
	for _, k := range kernels {
		l.positionTypes(k.name, k.line, k.params)
	}
	for _, in := range instances {
		if in.hasPar {
			l.positionTypes(in.host, in.line, in.params)
		}
	}
	return errors.Join(l.errs...)
}

// scopes returns, for every token, the kind of the innermost brace around
// it (scopeNamespace outside every brace).
func (l *linter) scopes() []int {
	out := make([]int, len(l.toks))
	stack := []int{scopeNamespace}
	head := 0 // first token of the current statement
	for i, t := range l.toks {
		out[i] = stack[len(stack)-1]
		switch t.text {
		case "{":
			kind := scopeCode
			cur := stack[len(stack)-1]
			prev := l.tok(i - 1)
			switch {
			case cur == scopeInit || prev == "=" || prev == "," || prev == "(" || prev == "return":
				kind = scopeInit
			default:
				for j := head; j < i; j++ {
					switch l.toks[j].text {
					case "struct", "class", "union", "enum":
						kind = scopeAggregate
					case "namespace":
						kind = scopeNamespace
					}
				}
			}
			stack = append(stack, kind)
			head = i + 1
		case "}":
			if len(stack) > 1 {
				stack = stack[:len(stack)-1]
			}
			head = i + 1
		case ";":
			head = i + 1
		}
	}
	return out
}

func (l *linter) keywords() {
	for i, t := range l.toks {
		if why, ok := unsupported[t.text]; ok {
			l.errorf(t.off, "%q is not MSL: %s", t.text, why)
		}
		if fastMathUnsafe[t.text] && l.tok(i-1) != "." && l.tok(i-1) != "->" {
			l.errorf(t.off, "%s under Metal's default fast math: the compiler assumes no value is infinite or NaN and may fold this away; start maxima at a finite sentinel (-FLT_MAX) and test NaN or ±inf on the bits (as_type<uint>)", t.text)
		}
		if t.text == "delete" && l.tok(i-1) != "=" {
			l.errorf(t.off, "\"delete\" is not MSL: MSL has no new or delete")
		}
		if t.text == "std" && l.tok(i+1) == "::" {
			l.errorf(t.off, "std:: is not available in MSL; use the metal:: library (<metal_stdlib>)")
		}
		if (t.text == "struct" || t.text == "class") && l.tok(i-1) != "enum" && isIdentTok(l.tok(i+1)) {
			j := i + 2
			if l.tok(j) == "<" {
				if k := l.closeOf(j); k > 0 {
					j = k + 1
				}
			}
			if l.tok(j) == ":" {
				l.errorf(t.off, "%s %s derives from another class; MSL has no derived classes (use a member or a template parameter)", t.text, l.tok(i+1))
			}
		}
	}
}

// lambdas finds lambda introducers: a '[' where an expression starts,
// closed by ']' and followed by '(' or '{'. MSL 3.1 has no lambdas (3.2
// adds them).
func (l *linter) lambdas() {
	for i, t := range l.toks {
		if t.text != "[" {
			continue
		}
		prev := l.tok(i - 1)
		if isIdentTok(prev) && prev != "return" || prev == "]" || prev == ")" {
			continue // a subscript or an array declarator
		}
		k := l.closeOf(i)
		if k < 0 {
			continue
		}
		if next := l.tok(k + 1); next == "(" || next == "{" || next == "mutable" {
			l.errorf(t.off, "lambda expression: MSL 3.1 has none (they arrive in MSL 3.2, macOS 15); write a function or a struct with operator()")
		}
	}
}

// pointerType reports whether toks[a:b] look like a pointer or reference
// type — type words, then '*' or '&' (possibly several, with const and
// address spaces) — and where the first '*' or '&' is.
func (l *linter) pointerType(a, b int) (bool, int) {
	star := -1
	angle := 0 // open template brackets: a '*' inside one is not the declarator's
	for i := a; i < b; i++ {
		switch t := l.toks[i].text; t {
		case "*", "&":
			if angle != 0 {
				return false, -1 // i < n * m, not a type
			}
			if star < 0 {
				star = i
			}
		case "<":
			angle++
		case ">":
			angle--
		case ">>":
			angle -= 2
		case "::", ",", "const", "volatile", "typename", "unsigned", "signed":
		default:
			if !isIdentTok(t) && !(t[0] >= '0' && t[0] <= '9') {
				return false, -1
			}
			if star >= 0 && t != "const" && !addressSpaces[t] {
				return false, -1
			}
		}
	}
	return star >= 0 && angle == 0, star
}

// casts checks C-style casts (T*)x and the named casts <T*>.
func (l *linter) casts() {
	for i, t := range l.toks {
		switch {
		case t.text == "(":
			k := l.closeOf(i)
			if k < 0 || k-i < 3 {
				continue
			}
			last := l.tok(k - 1)
			if last != "*" && last != "&" && last != "const" {
				continue
			}
			// A cast is followed by its operand.
			next := l.tok(k + 1)
			if next == "" || !(isIdentTok(next) || next == "(" || next == "*" || next == "&" || next[0] >= '0' && next[0] <= '9') {
				continue
			}
			if ok, star := l.pointerType(i+1, k); ok && !l.hasAddressSpace(i+1, star) {
				l.errorf(t.off, "cast to a pointer or reference without an address space; write (device T*), (threadgroup T*), (thread T*) or (constant T*)")
			}
		case t.text == "static_cast" || t.text == "reinterpret_cast" || t.text == "const_cast":
			if l.tok(i+1) != "<" {
				continue
			}
			k := l.closeOf(i + 1)
			if k < 0 {
				continue
			}
			if ok, star := l.pointerType(i+2, k); ok && !l.hasAddressSpace(i+2, star) {
				l.errorf(t.off, "%s to a pointer or reference without an address space; name device, threadgroup, thread or constant in the type", t.text)
			}
		}
	}
}

// functions checks the parameter lists of function definitions (and of
// declarations outside function bodies, where a name followed by '(' cannot
// be a variable's initializer).
func (l *linter) functions(scopes []int) {
	for i, t := range l.toks {
		if t.text != "(" {
			continue
		}
		name := i - 1
		if l.tok(name) == ">" { // f<T>(…), an explicit instantiation
			depth := 0
			for j := name; j >= 0; j-- {
				if l.tok(j) == ">" {
					depth++
				} else if l.tok(j) == "<" {
					depth--
					if depth == 0 {
						name = j - 1
						break
					}
				}
			}
		}
		nameTok := l.tok(name)
		switch {
		case nameTok == ")" && l.tok(name-1) == "(" && l.tok(name-2) == "operator":
			name -= 2
		case l.tok(name-1) == "operator":
			name--
		case !isIdentTok(nameTok) || notNames[nameTok] || unsupported[nameTok] != "":
			continue
		}
		// A declaration's name follows its type (or Class:: before it).
		before := name - 1
		for l.tok(before) == "::" && isIdentTok(l.tok(before-1)) {
			before -= 2
		}
		prev := l.tok(before)
		if !(isIdentTok(prev) && !notNames[prev]) && prev != ">" && prev != "*" && prev != "&" {
			continue
		}
		k := l.closeOf(i)
		if k < 0 {
			continue
		}
		after := k + 1
		for after < len(l.toks) && (l.tok(after) == "const" || addressSpaces[l.tok(after)]) {
			after++
		}
		switch l.tok(after) {
		case "{":
			if body := l.closeOf(after); body > 0 && isIdentTok(l.tok(name)) {
				l.defs = append(l.defs, funcDef{name: l.tok(name), open: i, close: k, body: [2]int{after, body}})
			}
		case ";":
			if scopes[i] == scopeCode {
				continue
			}
		default:
			continue
		}
		l.params(i, k)
	}
}

// params checks each parameter between the parentheses at open and close.
func (l *linter) params(open, close int) {
	l.eachParam(open, close, func(a, end int) {
		for j := a; j < end; j++ {
			if tt := l.tok(j); tt == "*" || tt == "&" {
				if !l.hasAddressSpace(a, j) {
					l.errorf(l.toks[a].off, "parameter %q: a pointer or reference parameter needs an address space (device, constant, thread or threadgroup); MSL has no generic one", l.src(a, end))
				}
				return
			}
		}
	})
}

// src is the source text of toks[a:b], its white space collapsed.
func (l *linter) src(a, b int) string {
	if a >= b {
		return ""
	}
	end := l.toks[b-1].off + len(l.toks[b-1].text)
	return strings.Join(strings.Fields(string(l.c[l.toks[a].off:end])), " ")
}

// declarations checks statements that declare variables or members: a
// pointer or reference needs an address space, a static variable must be
// constant, and so must a variable at program scope.
func (l *linter) declarations(scopes []int) {
	start := true
	for i := 0; i < len(l.toks); i++ {
		t := l.toks[i].text
		if t == ";" || t == "{" || t == "}" {
			start = true
			continue
		}
		if t == "(" && l.tok(i-1) == "for" {
			start = true
			continue
		}
		if !start {
			continue
		}
		start = false
		if scopes[i] == scopeInit {
			continue
		}
		// The statement up to its end, or up to the first '=' or '('.
		end := i
		depth := 0
		stop := -1 // '=', '(' or '{' ending the declarator part
		for end < len(l.toks) {
			s := l.tok(end)
			if depth == 0 && (s == ";" || s == "{" || s == "}") {
				break
			}
			if depth == 0 && stop < 0 && (s == "=" || s == "(" || s == ":") {
				stop = end
			}
			switch s {
			case "(", "[":
				depth++
			case ")", "]":
				depth--
			}
			if depth < 0 {
				break
			}
			end++
		}
		if stop < 0 {
			stop = end
		}
		l.declaration(i, stop, end, scopes[i])
	}
}

// declaration looks at one statement: toks[a:stop] is the part before any
// initializer or parameter list, toks[a:end] the whole statement.
func (l *linter) declaration(a, stop, end, scope int) {
	first := l.tok(a)
	switch first {
	case "using", "typedef", "template", "return", "namespace", "struct", "class", "union", "enum",
		"static_assert", "case", "default", "else", "do", "if", "for", "while", "switch", "break",
		"continue", "public", "private", "protected", "friend", "extern", "operator", "auto":
		return
	}
	if stop-a < 2 {
		return
	}
	isFunc := l.tok(stop) == "("
	// Pointer or reference declarator: type words, '*' or '&', a name.
	name := stop - 1
	for name > a && l.tok(name) == "]" { // array declarator
		depth := 0
		for j := name; j > a; j-- {
			if l.tok(j) == "]" {
				depth++
			} else if l.tok(j) == "[" {
				depth--
				if depth == 0 {
					name = j - 1
					break
				}
			}
		}
	}
	if isIdentTok(l.tok(name)) && name > a && !notNames[l.tok(name)] {
		if ok, star := l.pointerType(a, name); ok {
			hasAuto := false
			for j := a; j < star; j++ {
				hasAuto = hasAuto || l.tok(j) == "auto"
			}
			if !hasAuto && isIdentTok(l.tok(a)) && !l.hasAddressSpace(a, star) {
				what := "variable"
				if isFunc {
					what = "function returning"
				}
				l.errorf(l.toks[a].off, "%s %q: a pointer or reference type needs an address space (device, constant, thread or threadgroup); MSL has no generic one", what, l.src(a, name+1))
			}
		}
	}
	if isFunc {
		return
	}
	// A plain variable declaration: type words then a name.
	declares := isIdentTok(l.tok(name)) && name > a
	for j := a; j < name && declares; j++ {
		s := l.tok(j)
		declares = isIdentTok(s) || s == "::" || s == "<" || s == ">" || s == "," || s == "*" || s == "&" || s[0] >= '0' && s[0] <= '9'
	}
	if !declares {
		return
	}
	static := false
	for j := a; j < name; j++ {
		static = static || l.tok(j) == "static"
	}
	if (static || scope == scopeNamespace) && !l.hasAddressSpace(a, name) {
		where := "a static variable"
		if !static {
			where = "a program-scope variable"
		}
		l.errorf(l.toks[a].off, "%s %q must be in the constant address space (constant T name = …;, or static constant constexpr in a struct)", where, l.tok(name))
	}
}

// Position attributes whose type may be a vector (MSL: ushort, ushort2,
// ushort3, uint, uint2, uint3); the rest take ushort or uint only.
var vectorPositions = map[string]bool{
	"thread_position_in_grid": true, "threads_per_grid": true, "thread_position_in_threadgroup": true,
	"threads_per_threadgroup": true, "threadgroup_position_in_grid": true,
	"dispatch_threads_per_threadgroup": true, "threadgroups_per_grid": true, "grid_size": true,
}

// positionTypes applies MSL's rules for the types of position attributes.
func (l *linter) positionTypes(kernel string, line int, params []Param) {
	bad := func(msg string) {
		key := fmt.Sprintf("%d:%s", line, msg)
		if !l.seen[key] {
			l.seen[key] = true
			l.errs = append(l.errs, &SourceError{l.file, line, fmt.Sprintf("kernel %s: %s", kernel, msg)})
		}
	}
	types := map[string]string{}
	firstVec, firstVecAttr := -1, ""
	for _, p := range params {
		if p.Attr == "buffer" || p.Attr == "threadgroup" || p.Attr == "" {
			continue
		}
		f := strings.Fields(p.Text)
		if len(f) < 2 {
			continue
		}
		typ := strings.TrimPrefix(strings.Join(f[:len(f)-1], " "), "const ")
		types[p.Attr] = typ
		base, n := strings.TrimRight(typ, "23"), 1
		if base != typ {
			n = int(typ[len(typ)-1] - '0')
		}
		if base != "uint" && base != "ushort" {
			bad(fmt.Sprintf("[[%s]] is %s; MSL takes ushort or uint (or their vectors where the attribute has components)", p.Attr, typ))
			continue
		}
		if !vectorPositions[p.Attr] {
			if n != 1 {
				bad(fmt.Sprintf("[[%s]] is %s; MSL takes a scalar ushort or uint", p.Attr, typ))
			}
			continue
		}
		if firstVec < 0 {
			firstVec, firstVecAttr = n, p.Attr
		} else if n != firstVec {
			bad(fmt.Sprintf("[[%s]] has %d components but [[%s]] has %d; MSL wants the same count for all grid and threadgroup positions and sizes", p.Attr, n, firstVecAttr, firstVec))
		}
	}
	same := func(a, b string) {
		ta, okA := types[a]
		tb, okB := types[b]
		if okA && okB && ta != tb {
			bad(fmt.Sprintf("[[%s]] is %s but [[%s]] is %s; MSL wants them the same type", a, ta, b, tb))
		}
	}
	same("thread_position_in_grid", "threads_per_grid")
	same("thread_position_in_threadgroup", "threads_per_threadgroup")
	same("thread_position_in_threadgroup", "dispatch_threads_per_threadgroup")
	same("threads_per_threadgroup", "dispatch_threads_per_threadgroup")
	if t, ok := types["thread_position_in_threadgroup"]; ok && strings.HasPrefix(t, "uint") {
		if ti, ok := types["thread_index_in_threadgroup"]; ok && ti != "uint" {
			bad(fmt.Sprintf("[[thread_index_in_threadgroup]] is %s but [[thread_position_in_threadgroup]] is %s; MSL wants uint then", ti, t))
		}
	}
}

// metalHeaders are the standard headers Apple's compiler provides that the
// shim supplies too.
var metalHeaders = map[string]bool{
	"metal_stdlib": true, "metal_atomic": true, "metal_common": true, "metal_compute": true,
	"metal_functional": true, "metal_geometric": true, "metal_integer": true, "metal_limits": true,
	"metal_math": true, "metal_matrix": true, "metal_numeric": true, "metal_pack": true,
	"metal_quadgroup": true, "metal_relational": true, "metal_simdgroup": true,
	"metal_simdgroup_matrix": true, "metal_type_traits": true, "metal_uniform": true,
}

var includeRe = regexp.MustCompile(`^\s*#\s*include\s*([<"])([^>"]*)[>"]`)

// lintIncludes makes the emulator resolve #include the way the Metal device
// does. newLibraryWithSource has no file system: engine/gpu/metal writes
// each project header named in quotes in place, from the same sources map,
// and fails on any other; the compiler itself knows only Metal's standard
// headers. g++ would also find a quoted name in the shim or the system
// headers, and a <…> name among the C++ library, so such an include would
// build here and fail on a Mac.
func lintIncludes(file, src string, sources map[string]string) error {
	var errs []error
	for i, line := range strings.Split(src, "\n") {
		m := includeRe.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		name := m[2]
		switch {
		case m[1] == `"`:
			if _, ok := sources[name]; !ok {
				errs = append(errs, &SourceError{file, i + 1, fmt.Sprintf("#include %q: no such file among the kernel sources; the Metal device resolves quoted includes only from them (a project header at the root of metalkernels/)", name)})
			}
		case !metalHeaders[name]:
			errs = append(errs, &SourceError{file, i + 1, fmt.Sprintf("#include <%s>: not a Metal standard header; kernels include <metal_stdlib> (or another metal_* header) and the project's own headers in quotes", name)})
		}
	}
	return errors.Join(errs...)
}

// ---------------------------------------------------------------- calls
//
// The shim expands every address space to nothing, so g++ also accepts a
// call that passes threadgroup memory to a helper written for device
// memory, which Metal rejects (there is no conversion between address
// spaces). calls checks the arguments of calls to the project's own
// functions where it can tell their address space from a declaration in the
// calling function: a pointer, an array, pointer arithmetic on one, an
// element, or the address of a variable. Anything else is taken on trust.

// paramSpace describes one parameter: a pointer or reference and the
// address space it names ("" for other parameters).
type paramSpace struct {
	ptr, ref bool
	space    string
	text     string
}

// funcSig is one definition's parameters.
type funcSig []paramSpace

// varInfo is what a declaration says about a variable.
type varInfo struct {
	pos   int // token index of the declaration
	ptr   bool
	ref   bool
	array bool
	space string // of the pointee (pointers, references) or of the object
}

// signatures returns the parameter spaces of every function defined in the
// file, by name (overloads in order).
func (l *linter) signatures() map[string][]funcSig {
	out := map[string][]funcSig{}
	for _, d := range l.defs {
		var sig funcSig
		l.eachParam(d.open, d.close, func(a, b int) {
			sig = append(sig, l.paramSpace(a, b))
		})
		out[d.name] = append(out[d.name], sig)
	}
	return out
}

// eachParam calls fn with the token range of each parameter (default
// arguments cut off) between open and close.
func (l *linter) eachParam(open, close int, fn func(a, b int)) {
	depth := 0
	start := open + 1
	emit := func(a, b int) {
		for j := a; j < b; j++ {
			if l.tok(j) == "=" {
				b = j
				break
			}
		}
		if b > a && !(b == a+1 && l.tok(a) == "void") {
			fn(a, b)
		}
	}
	for j := open + 1; j < close; j++ {
		switch l.tok(j) {
		case "(", "<", "[", "{":
			depth++
		case ")", ">", "]", "}":
			depth--
		case ">>":
			depth -= 2
		case ",":
			if depth == 0 {
				emit(start, j)
				start = j + 1
			}
		}
	}
	emit(start, close)
}

func (l *linter) paramSpace(a, b int) paramSpace {
	p := paramSpace{text: l.src(a, b)}
	for j := a; j < b; j++ {
		switch t := l.tok(j); {
		case t == "*":
			p.ptr = true
		case t == "&":
			p.ref = true
		case addressSpaces[t] && p.space == "":
			p.space = t
		}
	}
	if p.ptr {
		p.ref = false // a reference to a pointer is still passed a pointer
	}
	return p
}

// variable reads a declaration at toks[a:…]: type words, a name, then '=',
// ';', ',', '[', ')' or the end b. It returns the name and what it is.
func (l *linter) variable(a, b int) (string, varInfo, bool) {
	j := a
	name := -1
	idents := 0
	for j < b {
		t := l.tok(j)
		switch {
		case t == "<":
			k := l.closeOf(j)
			if k < 0 || k >= b {
				return "", varInfo{}, false
			}
			j = k
		case t == "*" || t == "&" || t == "::":
		case isIdentTok(t) && !notNames[t] && unsupported[t] == "" && t != "operator":
			idents++
			name = j
		default:
			goto done
		}
		j++
	}
done:
	if name < 0 || idents < 2 {
		return "", varInfo{}, false
	}
	if j < b {
		switch l.tok(j) {
		case "=", ";", ",", "[", ")":
		default:
			return "", varInfo{}, false
		}
	}
	v := varInfo{pos: name, array: j < b && l.tok(j) == "["}
	for k := a; k < name; k++ {
		switch t := l.tok(k); {
		case t == "*":
			v.ptr = true
		case t == "&":
			v.ref = true
		case addressSpaces[t] && v.space == "":
			v.space = t
		}
	}
	if v.space == "" {
		if v.ptr || v.ref {
			return "", varInfo{}, false // reported by the declaration check
		}
		v.space = "thread" // a local or a parameter passed by value
	}
	return l.tok(name), v, true
}

// calls checks the calls inside every function body of the file.
func (l *linter) calls(known map[string][]funcSig) {
	funcs := map[string][]funcSig{}
	for k, v := range known {
		funcs[k] = append(funcs[k], v...)
	}
	for k, v := range l.signatures() {
		funcs[k] = append(funcs[k], v...)
	}
	for _, d := range l.defs {
		vars := map[string][]varInfo{}
		l.eachParam(d.open, d.close, func(a, b int) {
			if n, v, ok := l.variable(a, b); ok {
				v.pos = d.open
				vars[n] = append(vars[n], v)
			}
		})
		// Declarations in the body, in order.
		start := true
		for i := d.body[0] + 1; i < d.body[1]; i++ {
			t := l.tok(i)
			if t == ";" || t == "{" || t == "}" || t == "(" && l.tok(i-1) == "for" {
				start = true
				continue
			}
			if start {
				start = false
				end := i
				for end < d.body[1] && l.tok(end) != ";" && l.tok(end) != "{" && l.tok(end) != "}" {
					end++
				}
				if n, v, ok := l.variable(i, end); ok {
					l.initializer(v, i, end, vars)
					vars[n] = append(vars[n], v)
				}
			}
		}
		lookup := func(name string, at int) (varInfo, bool) {
			var best varInfo
			found := false
			for _, v := range vars[name] {
				if v.pos < at {
					best, found = v, true
				}
			}
			return best, found
		}
		for i := d.body[0] + 1; i < d.body[1]; i++ {
			if l.tok(i) == "(" {
				l.castSpace(i, lookup)
			}
			name := l.tok(i)
			sigs, ok := funcs[name]
			if !ok || !isIdentTok(name) {
				continue
			}
			if p := l.tok(i - 1); p == "." || p == "->" || p == "::" {
				continue // a member or qualified call: another function
			}
			open := i + 1
			if l.tok(open) == "<" {
				k := l.closeOf(open)
				if k < 0 {
					continue
				}
				open = k + 1
			}
			if l.tok(open) != "(" {
				continue
			}
			close := l.closeOf(open)
			if close < 0 {
				continue
			}
			if mismatch := l.callMismatch(name, sigs, open, close, lookup); mismatch != "" {
				l.errorf(l.toks[i].off, "%s; MSL does not convert between address spaces (write an overload for this space, or take the space as a template parameter)", mismatch)
			}
		}
	}
}

// callMismatch checks a call of name, its arguments between the
// parentheses at open and close, against the overloads sigs: "" when one
// matches (or none has as many parameters), else what is wrong with the
// first that has.
func (l *linter) callMismatch(name string, sigs []funcSig, open, close int, lookup func(string, int) (varInfo, bool)) string {
	var args [][2]int
	l.eachParam(open, close, func(a, b int) { args = append(args, [2]int{a, b}) })
	var mismatch string
	for _, sig := range sigs {
		if len(sig) != len(args) {
			continue
		}
		bad := ""
		for n, arg := range args {
			if msg := l.argMismatch(sig[n], arg[0], arg[1], lookup); msg != "" {
				bad = fmt.Sprintf("%s: argument %d %s", name, n+1, msg)
				break
			}
		}
		if bad == "" {
			return ""
		}
		if mismatch == "" {
			mismatch = bad
		}
	}
	return mismatch
}

// argSpace tells, from the declarations lookup finds, which address space
// the expression toks[a:b] is in: a pointer value (isPtr) pointing into
// space, or an lvalue in space. ok is false when it cannot tell.
func (l *linter) argSpace(a, b int, lookup func(string, int) (varInfo, bool)) (space string, isPtr, ok bool) {
	addr := false
	if l.tok(a) == "&" {
		addr = true
		a++
	}
	name := l.tok(a)
	if !isIdentTok(name) || a >= b {
		return "", false, false
	}
	v, found := lookup(name, a)
	if !found {
		return "", false, false
	}
	elem := l.tok(a+1) == "[" && l.closeOf(a+1) == b-1
	arith := (l.tok(a+1) == "+" || l.tok(a+1) == "-") && a+2 < b
	alone := a+1 == b
	switch {
	case addr && alone && !v.ptr:
		return v.space, true, true // &object
	case addr && elem && (v.ptr || v.array):
		return v.space, true, true // &p[i]
	case addr:
		return "", false, false
	case alone && (v.ptr || v.array):
		return v.space, true, true
	case alone:
		return v.space, false, true // an object or a reference
	case arith && (v.ptr || v.array):
		return v.space, true, true
	case elem && (v.ptr || v.array):
		return v.space, false, true
	}
	return "", false, false
}

// argMismatch returns why the argument toks[a:b] cannot bind to p, or "".
func (l *linter) argMismatch(p paramSpace, a, b int, lookup func(string, int) (varInfo, bool)) string {
	if p.space == "" || !(p.ptr || p.ref) {
		return ""
	}
	space, isPtr, ok := l.argSpace(a, b, lookup)
	if !ok || isPtr != p.ptr || space == p.space {
		return ""
	}
	what := "points to"
	if !isPtr {
		what = "is"
	}
	return fmt.Sprintf("(%s) %s %s memory, but parameter %q takes %s", l.src(a, b), what, space, p.text, p.space)
}

// collectSignatures returns the function signatures defined in a header,
// for checking the calls other files make into it.
func collectSignatures(src string) map[string][]funcSig {
	c := code(src)
	cw := make([]byte, len(c))
	copy(cw, c)
	for i := 0; i+1 < len(cw); i++ {
		if cw[i] == '[' && cw[i+1] == '[' {
			end := strings.Index(string(cw[i:]), "]]")
			if end < 0 {
				break
			}
			blank(cw, i, i+end+2)
			i += end + 1
		}
	}
	l := &linter{c: c, toks: tokenize(cw), seen: map[string]bool{}}
	l.functions(l.scopes())
	return l.signatures()
}

// initializer checks that a pointer or reference declared at toks[a:end]
// with an initializer gets memory of its own address space.
func (l *linter) initializer(v varInfo, a, end int, vars map[string][]varInfo) {
	if !(v.ptr || v.ref) {
		return
	}
	eq := v.pos + 1
	for eq < end && l.tok(eq) == "[" {
		if k := l.closeOf(eq); k > 0 {
			eq = k + 1
		} else {
			return
		}
	}
	if l.tok(eq) != "=" {
		return
	}
	lookup := func(name string, at int) (varInfo, bool) {
		var best varInfo
		found := false
		for _, w := range vars[name] {
			if w.pos < at {
				best, found = w, true
			}
		}
		return best, found
	}
	space, isPtr, ok := l.argSpace(eq+1, end, lookup)
	if !ok || isPtr != v.ptr || space == v.space {
		return
	}
	what := "points to"
	if !isPtr {
		what = "is"
	}
	l.errorf(l.toks[a].off, "%q is initialized with %s, which %s %s memory; MSL does not convert between address spaces", l.src(a, eq), l.src(eq+1, end), what, space)
}

// castSpace checks a cast at the parenthesis open to a pointer type with an
// address space: its operand must point into the same space, since MSL
// cannot cast a pointer from one address space to another.
func (l *linter) castSpace(open int, lookup func(string, int) (varInfo, bool)) {
	k := l.closeOf(open)
	if k < 0 || k-open < 3 || l.tok(k-1) != "*" {
		return
	}
	ok, star := l.pointerType(open+1, k)
	if !ok || !l.hasAddressSpace(open+1, star) {
		return
	}
	target := ""
	for j := open + 1; j < star; j++ {
		if addressSpaces[l.tok(j)] {
			target = l.tok(j)
		}
	}
	// The operand: a name (not followed by a postfix operator, which would
	// bind first), or a parenthesized expression.
	a, b := k+1, k+2
	switch next := l.tok(k + 1); {
	case next == "(":
		cl := l.closeOf(k + 1)
		if cl < 0 {
			return
		}
		a, b = k+2, cl
	case isIdentTok(next):
		if p := l.tok(k + 2); p == "[" || p == "." || p == "(" || p == "->" || p == "::" {
			return
		}
	default:
		return
	}
	space, isPtr, known := l.argSpace(a, b, lookup)
	if !known || !isPtr || space == target {
		return
	}
	l.errorf(l.toks[open].off, "cast of %s, which points to %s memory, to a %s pointer: MSL cannot move a pointer to another address space", l.src(a, b), space, target)
}
