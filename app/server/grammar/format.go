package grammar

// formats builds the contents (without quotes) of strings of the formats
// the compiler generates. Each automaton accepts only valid values (days
// past the 28th exist only in months that have them; February stops at the
// 28th, as leap years are not tracked; no leap seconds), so that a
// validator that asserts formats accepts every generated value.
var formats = map[string]func(n *nfa) frag{
	"date":      func(n *nfa) frag { return n.date() },
	"time":      func(n *nfa) frag { return n.time() },
	"date-time": func(n *nfa) frag { return n.seq(n.date(), n.class(byteRange{'T', 'T'}, byteRange{'t', 't'}), n.time()) },
	"uuid": func(n *nfa) frag {
		hex := func(k int) frag {
			return n.repeat(k, k, func() frag { return n.class(byteRange{'0', '9'}, byteRange{'a', 'f'}, byteRange{'A', 'F'}) })
		}
		return n.seq(hex(8), n.lit("-"), hex(4), n.lit("-"), hex(4), n.lit("-"), hex(4), n.lit("-"), hex(12))
	},
}

func (n *nfa) digit(lo, hi byte) frag { return n.class(byteRange{lo, hi}) }

// date is YYYY-MM-DD.
func (n *nfa) date() frag {
	day := func(last byte) frag { // 01..(2|3)last
		parts := []frag{
			n.seq(n.lit("0"), n.digit('1', '9')),
			n.seq(n.lit("1"), n.digit('0', '9')),
		}
		switch last {
		case '8':
			parts = append(parts, n.seq(n.lit("2"), n.digit('0', '8')))
		case '0':
			parts = append(parts, n.seq(n.lit("2"), n.digit('0', '9')), n.lit("30"))
		case '1':
			parts = append(parts, n.seq(n.lit("2"), n.digit('0', '9')), n.seq(n.lit("3"), n.digit('0', '1')))
		}
		return n.alt(parts...)
	}
	month := func(names ...string) frag {
		var parts []frag
		for _, m := range names {
			parts = append(parts, n.lit(m))
		}
		return n.alt(parts...)
	}
	return n.seq(n.digits(4, 4), n.lit("-"), n.alt(
		n.seq(month("01", "03", "05", "07", "08", "10", "12"), n.lit("-"), day('1')),
		n.seq(month("04", "06", "09", "11"), n.lit("-"), day('0')),
		n.seq(month("02"), n.lit("-"), day('8')),
	))
}

// time is hh:mm:ss with optional fraction and a required offset (RFC 3339
// full-time, as JSON Schema's "time" format asks).
func (n *nfa) time() frag {
	hour := func() frag {
		return n.alt(n.seq(n.digit('0', '1'), n.digit('0', '9')), n.seq(n.lit("2"), n.digit('0', '3')))
	}
	minute := func() frag { return n.seq(n.digit('0', '5'), n.digit('0', '9')) }
	return n.seq(hour(), n.lit(":"), minute(), n.lit(":"), minute(),
		n.opt(n.seq(n.lit("."), n.digits(1, 9))),
		n.alt(n.class(byteRange{'Z', 'Z'}, byteRange{'z', 'z'}),
			n.seq(n.class(byteRange{'+', '+'}, byteRange{'-', '-'}), hour(), n.lit(":"), minute())))
}
