package grammar

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// maxMagnitude is the largest integer jsonInteger writes (maxIntDigits
// nines): the bound of an integer range left open.
var maxMagnitude = int64(math.Pow10(maxIntDigits)) - 1

// integerBounds reads minimum, maximum and their exclusive forms as the
// integer range [lo, hi] they allow.
func (c *compiler) integerBounds(obj *chat.Object, path string) (lo, hi int64, bounded bool, err error) {
	lo, hi = -maxMagnitude, maxMagnitude
	for _, k := range []string{"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"} {
		v, ok := obj.Get(k)
		if !ok {
			continue
		}
		num, isNum := v.(json.Number)
		f, perr := strconv.ParseFloat(string(num), 64)
		if !isNum || perr != nil || math.IsInf(f, 0) {
			return 0, 0, false, c.errorf(path+"/"+k, "must be a number")
		}
		bounded = true
		// An integer bound is taken exactly (a float64 rounds integers
		// past 2^53); others are rounded inward.
		if i, err := strconv.ParseInt(string(num), 10, 64); err == nil {
			i = max(min(i, maxMagnitude+1), -maxMagnitude-1)
			switch k {
			case "minimum":
				lo = max(lo, i)
			case "exclusiveMinimum":
				lo = max(lo, i+1)
			case "maximum":
				hi = min(hi, i)
			case "exclusiveMaximum":
				hi = min(hi, i-1)
			}
			continue
		}
		f = math.Max(math.Min(f, float64(maxMagnitude)+1), -float64(maxMagnitude)-1)
		switch k {
		case "minimum":
			lo = max(lo, int64(math.Ceil(f)))
		case "exclusiveMinimum":
			lo = max(lo, int64(math.Floor(f))+1)
		case "maximum":
			hi = min(hi, int64(math.Floor(f)))
		case "exclusiveMaximum":
			hi = min(hi, int64(math.Ceil(f))-1)
		}
	}
	if lo > hi {
		return 0, 0, false, c.errorf(path, "no integer lies between the bounds")
	}
	return lo, hi, bounded, nil
}

// integerRange matches the decimal integers in [lo, hi], written as JSON
// writes them (no leading zeros, no "-0").
func (n *nfa) integerRange(lo, hi int64) frag {
	var parts []frag
	if lo < 0 {
		// −[max(1, −hi), −lo]
		parts = append(parts, n.seq(n.lit("-"), n.naturalRange(max(1, -hi), -lo)))
	}
	if hi >= 0 {
		parts = append(parts, n.naturalRange(max(0, lo), hi))
	}
	return n.alt(parts...)
}

// naturalRange matches the integers in [lo, hi], 0 ≤ lo ≤ hi, split by
// digit count into ranges of equal-length numbers.
func (n *nfa) naturalRange(lo, hi int64) frag {
	var parts []frag
	for length := len(strconv.FormatInt(lo, 10)); length <= len(strconv.FormatInt(hi, 10)); length++ {
		first := int64(math.Pow10(length - 1))
		if length == 1 {
			first = 0
		}
		last := int64(math.Pow10(length)) - 1
		a, b := max(lo, first), min(hi, last)
		if a > b {
			continue
		}
		parts = append(parts, n.digitRange(strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)))
	}
	return n.alt(parts...)
}

// digitRange matches the digit strings of one length between x and y
// (x ≤ y): the shared leading digits, then x's tail up to all nines, the
// digits between, and all zeros up to y's tail.
func (n *nfa) digitRange(x, y string) frag {
	if x == "" {
		return n.empty()
	}
	if x[0] == y[0] {
		return n.seq(n.lit(x[:1]), n.digitRange(x[1:], y[1:]))
	}
	rest := len(x) - 1
	nines, zeros := strings.Repeat("9", rest), strings.Repeat("0", rest)
	if x[1:] == zeros && y[1:] == nines {
		return n.seq(n.class(byteRange{x[0], y[0]}), n.digits(rest, rest))
	}
	parts := []frag{n.seq(n.lit(x[:1]), n.digitRange(x[1:], nines))}
	if y[0]-x[0] > 1 {
		parts = append(parts, n.seq(n.class(byteRange{x[0] + 1, y[0] - 1}), n.digits(rest, rest)))
	}
	parts = append(parts, n.seq(n.lit(y[:1]), n.digitRange(zeros, y[1:])))
	return n.alt(parts...)
}
