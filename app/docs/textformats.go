package docs

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"io"
	"strings"
)

// plainText reads text and Markdown: the decoded text as it is.
func (x *extraction) plainText() (string, string, error) {
	return x.decodedText()
}

// decodedText decodes the file's text and counts it against MaxChars: the
// text formats' output is their text, in a table or a fence.
func (x *extraction) decodedText() (string, string, error) {
	text, enc, err := x.decodeText(x.data)
	if err != nil {
		return "", "", err
	}
	if err := x.spendString(text); err != nil {
		return "", "", err
	}
	return text, enc, nil
}

// code reads source code into a fenced block named by its language, so
// that the model sees where the file starts and ends and what it is.
func (x *extraction) code(language string) (string, string, error) {
	text, enc, err := x.decodedText()
	if err != nil {
		return "", "", err
	}
	return fence(language, text), enc, nil
}

// fence wraps text in a Markdown code fence longer than any backtick run
// inside it.
func fence(language, text string) string {
	longest, run := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	marks := strings.Repeat("`", max(3, longest+1))
	return marks + language + "\n" + strings.TrimRight(text, "\n") + "\n" + marks
}

// csv reads a CSV or TSV table into a Markdown table. A bare quote inside
// an unquoted field ("5" screen") is read as a character, as spreadsheet
// programs do; a quoted field that never closes is an error, since the
// rest of the file would silently become one cell.
func (x *extraction) csv(tabs bool) (string, string, error) {
	text, enc, err := x.decodedText()
	if err != nil {
		return "", "", err
	}
	comma := ','
	if tabs {
		comma = '\t'
	} else if first, _, _ := strings.Cut(text, "\n"); strings.Count(first, "\t") > 0 && !strings.Contains(first, ",") {
		comma = '\t' // a .csv file that is tab-separated, as Excel exports "Unicode text"
	}
	// The reader holds a record's fields at once (some 40 bytes each), and
	// every cell costs three characters of the table at least ("| x "):
	// a table of more than a quarter of MaxChars cells would be over the
	// text limit once written, so it is refused before it is read (15 MB
	// of commas once took a gigabyte).
	if cells := strings.Count(text, string(comma)) + strings.Count(text, "\n") + 1; x.limits.MaxChars > 0 && cells > x.limits.MaxChars/4 {
		return "", "", failure(x.name, ErrTextLimit, "is a table of more than %s cells, which written out is over the limit of %s characters of text for one document; attach the part you need", thousands(x.limits.MaxChars/4), thousands(x.limits.MaxChars))
	}
	rows, err := x.readCSV(text, comma, false)
	var parseErr *csv.ParseError
	if errors.As(err, &parseErr) && errors.Is(parseErr.Err, csv.ErrBareQuote) {
		rows, err = x.readCSV(text, comma, true)
	}
	if err != nil {
		if errors.As(err, &parseErr) {
			return "", "", failure(x.name, ErrDamaged, "is not a readable table: line %d, column %d: %v; fix the quoting there, or rename the file to .txt to attach it as plain text", parseErr.Line, parseErr.Column, parseErr.Err)
		}
		return "", "", err
	}
	return markdownTable(rows), enc, nil
}

func (x *extraction) readCSV(text string, comma rune, lazy bool) ([][]string, error) {
	r := csv.NewReader(strings.NewReader(text))
	r.Comma = comma
	r.FieldsPerRecord = -1
	r.LazyQuotes = lazy
	var rows [][]string
	for i := 0; ; i++ {
		if i%4096 == 0 {
			if err := x.check(); err != nil {
				return nil, err
			}
		}
		row, err := r.Read()
		if err == io.EOF {
			return rows, nil
		}
		if err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
}

// json reads a JSON file into a fenced json block, after checking that it
// is JSON: a broken file is reported with the line and column of the fault.
func (x *extraction) json() (string, string, error) {
	text, enc, err := x.decodedText()
	if err != nil {
		return "", "", err
	}
	if err := x.check(); err != nil {
		return "", "", err
	}
	dec := json.NewDecoder(strings.NewReader(text))
	for {
		var skip json.RawMessage
		err := dec.Decode(&skip)
		if err == io.EOF {
			break
		}
		if err != nil {
			offset := dec.InputOffset()
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) {
				offset = syntax.Offset - 1 // Offset counts the offending byte
			}
			line, col := lineColumn(text, offset)
			return "", "", failure(x.name, ErrDamaged, "is not valid JSON: line %d, column %d: %v; fix it, or rename the file to .txt to attach it as plain text", line, col, err)
		}
	}
	return fence("json", text), enc, nil
}

// lineColumn turns a byte offset into 1-based line and column numbers.
func lineColumn(text string, offset int64) (int, int) {
	offset = min(max(offset, 0), int64(len(text)))
	before := text[:offset]
	line := strings.Count(before, "\n") + 1
	col := len(before) - strings.LastIndexByte(before, '\n')
	return line, col
}

// markdownTable writes rows as a Markdown table, the first row as header.
// Rows are padded to the widest row; empty trailing columns are dropped.
// Pipes in cells are escaped and line breaks become <br>, so that every
// row stays on one line. Cells are not padded to equal widths: the model
// needs the pipes, not the alignment, and spaces cost tokens.
//
// A sparse table, a few wide rows among many narrow ones, would pad into a
// grid of rows × columns many times the size of its cells (9 KB of CSV, one
// row of 3,000 columns over 3,000 rows of one, made 27 MB; FuzzCSV found
// it): then each row after the header keeps only its own cells, so that
// the text stays in proportion to the document.
func markdownTable(rows [][]string) string {
	width, cells := 0, 0
	for _, row := range rows {
		used := usedCells(row)
		width = max(width, used)
		cells += used
	}
	if width == 0 {
		return ""
	}
	sparse := len(rows)*width > 4*cells+4096
	var b strings.Builder
	writeRow := func(row []string, n int) {
		b.WriteString("|")
		for i := range n {
			cell := ""
			if i < len(row) {
				cell = tableCell(row[i])
			}
			b.WriteString(" ")
			b.WriteString(cell)
			b.WriteString(" |")
		}
		b.WriteString("\n")
	}
	first := true
	for _, row := range rows {
		if isBlankRow(row) && !first {
			continue
		}
		n := width
		if sparse && !first { // the header keeps every column
			n = max(1, usedCells(row))
		}
		writeRow(row, n)
		if first {
			b.WriteString("|" + strings.Repeat(" --- |", width) + "\n")
			first = false
		}
	}
	return strings.TrimRight(b.String(), "\n")
}

// usedCells is the number of cells of row up to its last non-blank one.
func usedCells(row []string) int {
	for i := len(row) - 1; i >= 0; i-- {
		if strings.TrimSpace(row[i]) != "" {
			return i + 1
		}
	}
	return 0
}

func isBlankRow(row []string) bool {
	for _, c := range row {
		if strings.TrimSpace(c) != "" {
			return false
		}
	}
	return true
}

var cellReplacer = strings.NewReplacer("|", `\|`, "\r\n", "<br>", "\n", "<br>", "\r", "<br>")

// tableCell writes a cell's text for a Markdown table: one line, pipes
// escaped, a line break (or several: paragraphs) as one <br>.
func tableCell(s string) string {
	s = strings.TrimSpace(normalizeNewlines(s))
	for strings.Contains(s, "\n\n") {
		s = strings.ReplaceAll(s, "\n\n", "\n")
	}
	return cellReplacer.Replace(s)
}

// flattenTable writes a table nested in another table's cell as lines of
// text, its cells apart by spaces: Markdown has no nested tables, and
// writing the inner one as a Markdown table would escape its pipes once
// more at every level (output growing with the square of the depth).
func flattenTable(rows [][]string) string {
	lines := make([]string, 0, len(rows))
	for _, row := range rows {
		var cells []string
		for _, c := range row {
			if c = strings.TrimSpace(c); c != "" {
				cells = append(cells, c)
			}
		}
		if len(cells) > 0 {
			lines = append(lines, strings.Join(cells, " "))
		}
	}
	return strings.Join(lines, "\n")
}
