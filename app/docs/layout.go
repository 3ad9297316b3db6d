package docs

import (
	"math"
	"slices"
	"sort"
	"strings"
)

// glyph is one character a PDF page draws, at its baseline origin (x, y)
// in points, y growing upwards.
type glyph struct {
	x, y, w, size float64
	s             string
	// estimated is set when x and w were estimated (spreadRuns); runX is
	// then the x the library gave, the start of the glyph's run.
	estimated bool
	runX      float64
}

func (g glyph) end() float64 {
	if g.w > 0 {
		return g.x + g.w
	}
	return g.x + 0.5*g.size // widths unknown to the library: half an em
}

// pdfLine is a run of glyphs on one baseline, sorted by x.
type pdfLine struct {
	y      float64
	size   float64
	glyphs []glyph
}

// Thresholds of the layout, in ems of the glyphs' font size. A word space
// is about a quarter of an em in common fonts and kerning moves letters by
// a few hundredths; a gap of more than 1.2 em inside a line is a tab stop
// or a table's column (justified text in narrow columns stretches word
// spaces to about 0.6 em).
const (
	wordGapEm     = 0.15
	columnGapEm   = 1.2
	baselineEm    = 0.35 // glyphs within this of a line's baseline are on it
	paragraphGap  = 1.25 // a line pitch this many times the usual starts a paragraph
	minGutterEm   = 0.7  // narrowest gap between two columns of text
	spanningShare = 0.1  // lines that may cross a gutter (titles, footers): this share, or 2
)

// pdfPageText puts a page's glyphs in reading order: lines top to bottom,
// and on a page of two columns the left column's lines before the right
// column's, with lines that cross the gutter (a title over both columns,
// a footer) read in their place between the column blocks.
func pdfPageText(glyphs []glyph) string {
	lines := groupLines(glyphs)
	if len(lines) == 0 {
		return ""
	}
	gutterStart, gutterEnd, ok := findGutter(lines)
	if !ok {
		return joinLines(lines)
	}
	var out []string
	var left, right []pdfLine
	flush := func() {
		if len(left) > 0 {
			out = append(out, joinLines(left))
		}
		if len(right) > 0 {
			out = append(out, joinLines(right))
		}
		left, right = nil, nil
	}
	for _, l := range lines {
		var lg, rg []glyph
		spanning := false
		for _, g := range l.glyphs {
			switch {
			case g.end() <= gutterStart+0.01:
				lg = append(lg, g)
			case g.x >= gutterEnd-0.01:
				rg = append(rg, g)
			default:
				spanning = true
			}
		}
		if spanning {
			flush()
			out = append(out, joinLines([]pdfLine{l}))
			continue
		}
		if len(lg) > 0 {
			left = append(left, pdfLine{y: l.y, size: l.size, glyphs: lg})
		}
		if len(rg) > 0 {
			right = append(right, pdfLine{y: l.y, size: l.size, glyphs: rg})
		}
	}
	flush()
	return strings.Join(out, "\n\n")
}

// groupLines gathers glyphs into lines by baseline, top line first.
func groupLines(glyphs []glyph) []pdfLine {
	var gs []glyph
	for _, g := range glyphs {
		// "\n" (or U+FFFD, from fonts with two-byte codes) is what the
		// library emits after each TJ array, not a glyph of the page.
		if g.s == "" || g.s == "\n" || g.s == "\r" || g.s == "\ufffd" || math.IsNaN(g.x) || math.IsNaN(g.y) || math.IsInf(g.x, 0) || math.IsInf(g.y, 0) {
			continue
		}
		if g.size <= 0 || math.IsNaN(g.size) {
			g.size = 1
		}
		gs = append(gs, g)
	}
	sort.SliceStable(gs, func(i, j int) bool { return gs[i].y > gs[j].y })
	var lines []pdfLine
	for _, g := range gs {
		n := len(lines)
		if n > 0 && math.Abs(lines[n-1].y-g.y) <= baselineEm*max(lines[n-1].size, g.size) {
			lines[n-1].glyphs = append(lines[n-1].glyphs, g)
			lines[n-1].size = max(lines[n-1].size, g.size)
			continue
		}
		lines = append(lines, pdfLine{y: g.y, size: g.size, glyphs: []glyph{g}})
	}
	for i := range lines {
		slices.SortStableFunc(lines[i].glyphs, func(a, b glyph) int {
			switch {
			case a.x < b.x:
				return -1
			case a.x > b.x:
				return 1
			}
			return 0
		})
	}
	return lines
}

// findGutter looks for the empty vertical strip between two columns of
// text: a band of x that the glyphs of nearly every line leave empty, in
// the middle of the text, with lines of text on both sides that run up to
// it (a column) rather than stop short of it (a table's cells).
func findGutter(lines []pdfLine) (start, end float64, ok bool) {
	if len(lines) < 4 {
		return 0, 0, false
	}
	minX, maxX := math.Inf(1), math.Inf(-1)
	var sizes []float64
	for _, l := range lines {
		for _, g := range l.glyphs {
			if strings.TrimSpace(g.s) == "" {
				continue
			}
			minX, maxX = min(minX, g.x), max(maxX, g.end())
			sizes = append(sizes, g.size)
		}
	}
	width := maxX - minX
	if len(sizes) == 0 || width <= 0 || width > 1e5 {
		return 0, 0, false
	}
	slices.Sort(sizes)
	em := sizes[len(sizes)/2]
	// Coverage of 1-point bins: how many lines put a glyph over each.
	bins := int(math.Ceil(width)) + 1
	cover := make([]int, bins)
	for _, l := range lines {
		last := -1
		for _, g := range l.glyphs {
			if strings.TrimSpace(g.s) == "" {
				continue
			}
			from := max(int(g.x-minX), last+1, 0)
			to := min(int(math.Ceil(g.end()-minX)), bins-1)
			for b := from; b <= to; b++ {
				cover[b]++
			}
			last = max(last, to)
		}
	}
	maxCrossing := max(2, int(spanningShare*float64(len(lines))))
	lo, hi := int(0.2*width), min(int(0.8*width), bins-1)
	// Each run of thinly covered bins proposes a split; the gutter is then the empty band around the split in
	// the lines that do not cross it.
	for b := lo; b <= hi; {
		if cover[b] > maxCrossing {
			b++
			continue
		}
		first, least := b, b
		for b <= hi && cover[b] <= maxCrossing {
			if cover[b] < cover[least] {
				least = b
			}
			b++
		}
		// The middle of the run first: a title that starts inside the
		// gutter then counts as crossing it, not as the right column's.
		for _, split := range []int{(first + b - 1) / 2, least} {
			x := minX + float64(split) + 0.5
			if start, end, ok := gutterAt(lines, x, minX, maxX, em); ok {
				return start, end, true
			}
		}
	}
	return 0, 0, false
}

// gutterAt checks a split at x: among the lines with no glyph over x, the
// text left of x must end, and the text right of x begin, at least
// minGutterEm apart; and both sides must read as columns of text, whose
// lines mostly fill the column's width (a table's cells mostly do not).
func gutterAt(lines []pdfLine, x, minX, maxX, em float64) (start, end float64, ok bool) {
	start, end = math.Inf(-1), math.Inf(1)
	var lefts, rights [][2]float64 // each side's extent per line
	for _, l := range lines {
		left, right := [2]float64{math.Inf(1), math.Inf(-1)}, [2]float64{math.Inf(1), math.Inf(-1)}
		crossing := false
		for _, g := range l.glyphs {
			if strings.TrimSpace(g.s) == "" {
				continue
			}
			switch {
			case g.end() <= x:
				left = [2]float64{min(left[0], g.x), max(left[1], g.end())}
			case g.x >= x:
				right = [2]float64{min(right[0], g.x), max(right[1], g.end())}
			default:
				crossing = true
			}
		}
		// A line with text close on both sides of x (a title's word space
		// at x) crosses it too.
		if crossing || left[1] > left[0] && right[1] > right[0] && right[0]-left[1] < minGutterEm*em {
			continue
		}
		if left[1] > left[0] {
			lefts = append(lefts, left)
			start = max(start, left[1])
		}
		if right[1] > right[0] {
			rights = append(rights, right)
			end = min(end, right[0])
		}
	}
	if len(lefts) < 3 || len(rights) < 3 || end-start < minGutterEm*em {
		return 0, 0, false
	}
	return start, end, fillsColumn(lefts, minX, start) && fillsColumn(rights, end, maxX)
}

// fillsColumn reports whether most lines of a side span at least half of
// the column between from and to.
func fillsColumn(extents [][2]float64, from, to float64) bool {
	full := 0
	for _, e := range extents {
		if e[1]-e[0] >= 0.5*(to-from) {
			full++
		}
	}
	return to-from > 0 && 2*full > len(extents)
}

// joinLines writes lines of one column, with a blank line where the
// vertical distance between two lines says a new paragraph starts.
func joinLines(lines []pdfLine) string {
	var pitches []float64
	for i := 1; i < len(lines); i++ {
		if d := lines[i-1].y - lines[i].y; d > 0 {
			pitches = append(pitches, d)
		}
	}
	usual := 0.0
	if len(pitches) > 0 {
		slices.Sort(pitches)
		usual = pitches[len(pitches)/2]
	}
	var b strings.Builder
	for i, l := range lines {
		text := lineText(l)
		if text == "" {
			continue
		}
		if b.Len() > 0 {
			if usual > 0 && lines[i-1].y-l.y > paragraphGap*usual {
				b.WriteString("\n\n")
			} else {
				b.WriteString("\n")
			}
		}
		b.WriteString(text)
	}
	return b.String()
}

// lineText writes one line's glyphs, with a space where the gap between
// two glyphs is a word space and a tab where it is a column's.
func lineText(l pdfLine) string {
	var b strings.Builder
	var prev *glyph
	pendingSpace := false
	for i := range l.glyphs {
		g := &l.glyphs[i]
		if strings.TrimSpace(g.s) == "" {
			pendingSpace = true
			continue
		}
		if prev != nil {
			// The same character drawn twice at nearly one place is fake
			// bold or a shadow: read it once. Only where widths are known:
			// for two-byte (CID) fonts the library gives no widths and puts
			// every character of a text run at the run's start.
			if g.w > 0 && g.s == prev.s && math.Abs(g.x-prev.x) < 0.1*g.size {
				continue
			}
			gap := g.x - prev.end()
			switch {
			case gap > columnGapEm*g.size:
				b.WriteByte('\t')
			case pendingSpace || gap > wordGapEm*g.size:
				b.WriteByte(' ')
			}
		}
		b.WriteString(ligatures.Replace(g.s))
		prev, pendingSpace = g, false
	}
	return strings.TrimSpace(b.String())
}

// ligatures spells out the typographic ligatures fonts draw as one glyph,
// which the model reads best as their letters.
var ligatures = strings.NewReplacer("\ufb00", "ff", "\ufb01", "fi", "\ufb02", "fl", "\ufb03", "ffi", "\ufb04", "ffl", "\ufb05", "st", "\ufb06", "st")
