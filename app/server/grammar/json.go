package grammar

// The fragments of JSON text: whitespace, strings, numbers, literals and
// values of any shape, as NFA fragments.

// Whitespace between tokens is bounded so that a model cannot pad forever:
// nothing, one space, or a newline followed by at most maxIndent spaces or
// tabs (pretty-printed JSON indented up to ten levels of two).
const maxIndent = 20

// Digits a number may have before the point, after it and in the exponent.
// Unbounded digits would let a model write a number forever; these stay
// within what a float64 holds (a three-digit exponent could overflow it,
// which many JSON decoders refuse).
const (
	maxIntDigits      = 16
	maxFractionDigits = 16
	maxExponentDigits = 2
)

func (n *nfa) ws() frag {
	return n.alt(
		n.empty(),
		n.lit(" "),
		n.seq(n.lit("\n"), n.repeat(0, maxIndent, func() frag { return n.class(byteRange{' ', ' '}, byteRange{'\t', '\t'}) })),
	)
}

// utf8Multibyte matches one well-formed UTF-8 character of two to four
// bytes (no surrogates, nothing past U+10FFFF).
func (n *nfa) utf8Multibyte() frag {
	cont := func() frag { return n.class(byteRange{0x80, 0xbf}) }
	one := func(lo, hi byte) frag { return n.class(byteRange{lo, hi}) }
	return n.alt(
		n.seq(one(0xc2, 0xdf), cont()),
		n.seq(one(0xe0, 0xe0), one(0xa0, 0xbf), cont()),
		n.seq(one(0xe1, 0xec), cont(), cont()),
		n.seq(one(0xed, 0xed), one(0x80, 0x9f), cont()),
		n.seq(one(0xee, 0xef), cont(), cont()),
		n.seq(one(0xf0, 0xf0), one(0x90, 0xbf), cont(), cont()),
		n.seq(one(0xf1, 0xf3), cont(), cont(), cont()),
		n.seq(one(0xf4, 0xf4), one(0x80, 0x8f), cont(), cont()),
	)
}

// asciiExcept is the printable ASCII range (with DEL) minus some bytes, as
// ranges.
func asciiExcept(exclude ...byte) []byteRange {
	var out []byteRange
	lo := 0x20
	for c := 0x20; c <= 0x80; c++ {
		excluded := c == 0x80
		for _, x := range exclude {
			excluded = excluded || byte(c) == x
		}
		if excluded {
			if c > lo {
				out = append(out, byteRange{byte(lo), byte(c - 1)})
			}
			lo = c + 1
		}
	}
	return out
}

// stringChar matches one character of a JSON string's contents: a
// printable character other than the quote and the backslash (and the
// extra excluded ASCII bytes), or an escape.
func (n *nfa) stringChar(exclude ...byte) frag {
	hex := func() frag { return n.class(byteRange{'0', '9'}, byteRange{'a', 'f'}, byteRange{'A', 'F'}) }
	escape := n.seq(n.lit(`\`), n.alt(
		n.class(byteRange{'"', '"'}, byteRange{'\\', '\\'}, byteRange{'/', '/'}, byteRange{'b', 'b'},
			byteRange{'f', 'f'}, byteRange{'n', 'n'}, byteRange{'r', 'r'}, byteRange{'t', 't'}),
		n.seq(n.lit("u"), hex(), hex(), hex(), hex()),
	))
	return n.alt(n.class(asciiExcept(append([]byte{'"', '\\'}, exclude...)...)...), n.utf8Multibyte(), escape)
}

// stringOptions shape a string fragment.
type stringOptions struct {
	// minLength and maxLength count characters (an escape is one); max < 0
	// is unbounded.
	minLength, maxLength int
	// noCloseTag keeps "</" out of the contents, for strings inside a
	// tool call's parameter value, where "</parameter>" would end it.
	noCloseTag bool
}

func (n *nfa) jsonString(o stringOptions) frag {
	open, close := n.lit(`"`), n.lit(`"`)
	if o.minLength > 0 || o.maxLength >= 0 {
		exclude := []byte{}
		if o.noCloseTag {
			exclude = append(exclude, '<')
		}
		body := n.repeat(o.minLength, o.maxLength, func() frag { return n.stringChar(exclude...) })
		return n.seq(open, body, close)
	}
	// Unbounded: a loop over characters; with noCloseTag a second state
	// remembers that the last character was '<', after which '/' may not
	// follow.
	normal := n.state()
	n.epsilon(open.out, normal)
	n.epsilon(normal, close.in)
	if !o.noCloseTag {
		ch := n.stringChar()
		n.epsilon(normal, ch.in)
		n.epsilon(ch.out, normal)
		return frag{open.in, close.out}
	}
	afterLT := n.state()
	n.epsilon(afterLT, close.in)
	ch := n.stringChar('<')
	n.epsilon(normal, ch.in)
	n.epsilon(ch.out, normal)
	lt := n.lit("<")
	n.epsilon(normal, lt.in)
	n.epsilon(lt.out, afterLT)
	ch2 := n.stringChar('<', '/')
	n.epsilon(afterLT, ch2.in)
	n.epsilon(ch2.out, normal)
	lt2 := n.lit("<")
	n.epsilon(afterLT, lt2.in)
	n.epsilon(lt2.out, afterLT)
	return frag{open.in, close.out}
}

func (n *nfa) digits(lo, hi int) frag {
	return n.repeat(lo, hi, func() frag { return n.class(byteRange{'0', '9'}) })
}

// jsonInteger matches -?(0|[1-9][0-9]*) with at most maxIntDigits digits.
func (n *nfa) jsonInteger() frag {
	return n.seq(n.opt(n.lit("-")), n.alt(n.lit("0"), n.seq(n.class(byteRange{'1', '9'}), n.digits(0, maxIntDigits-1))))
}

// jsonNumber adds an optional fraction and exponent to jsonInteger.
func (n *nfa) jsonNumber() frag {
	return n.seq(n.jsonInteger(),
		n.opt(n.seq(n.lit("."), n.digits(1, maxFractionDigits))),
		n.opt(n.seq(n.class(byteRange{'e', 'e'}, byteRange{'E', 'E'}), n.opt(n.class(byteRange{'+', '+'}, byteRange{'-', '-'})), n.digits(1, maxExponentDigits))))
}

// list matches open, then elements separated by commas, then close, with
// bounded whitespace around them: open ws (close | elem (ws , ws elem)* ws
// close). The element automaton is built once and looped on, so nesting
// lists grows the automaton linearly per level.
func (n *nfa) list(open, close string, elem func() frag) frag {
	start := n.seq(n.lit(open), n.ws())
	e := elem()
	end := n.state()
	empty := n.lit(close)
	n.epsilon(start.out, empty.in)
	n.epsilon(empty.out, end)
	n.epsilon(start.out, e.in)
	sep := n.seq(n.ws(), n.lit(","), n.ws())
	n.epsilon(e.out, sep.in)
	n.epsilon(sep.out, e.in)
	closing := n.seq(n.ws(), n.lit(close))
	n.epsilon(e.out, closing.in)
	n.epsilon(closing.out, end)
	return frag{start.in, end}
}

// anyValue matches any JSON value nested at most depth containers deep
// (depth 0: scalars only). noCloseTag is as in stringOptions.
func (n *nfa) anyValue(depth int, noCloseTag bool) frag {
	parts := []frag{
		n.jsonString(stringOptions{maxLength: -1, noCloseTag: noCloseTag}),
		n.jsonNumber(), n.lit("true"), n.lit("false"), n.lit("null"),
	}
	if depth > 0 {
		parts = append(parts,
			n.anyObject(noCloseTag, func() frag { return n.anyValue(depth-1, noCloseTag) }),
			n.list("[", "]", func() frag { return n.anyValue(depth-1, noCloseTag) }))
	}
	return n.alt(parts...)
}

// anyObject matches an object with any keys whose values value makes.
func (n *nfa) anyObject(noCloseTag bool, value func() frag) frag {
	key := stringOptions{maxLength: -1, noCloseTag: noCloseTag}
	return n.list("{", "}", func() frag {
		return n.seq(n.jsonString(key), n.ws(), n.lit(":"), n.ws(), value())
	})
}
