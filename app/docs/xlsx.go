package docs

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"
)

// xlsx reads an Excel workbook through github.com/xuri/excelize/v2: every
// sheet, in workbook order, as a heading and a Markdown table of its
// cells' formatted values (what Excel shows, not the formulas). Empty
// sheets are named and said to be empty; hidden sheets are read and marked.
func (x *extraction) xlsx() (string, int, error) {
	const what = "Excel workbook"
	// The ZIP directory is checked first: excelize unpacks parts whole.
	zr, err := x.openZip(what)
	if err != nil {
		return "", 0, err
	}
	if err := x.checkWorkbookText(zr, what); err != nil {
		return "", 0, err
	}
	limit := x.limits.MaxUnpackedBytes
	if limit <= 0 {
		limit = 1 << 40
	}
	f, err := excelize.OpenReader(bytes.NewReader(x.data), excelize.Options{
		UnzipSizeLimit:    limit,
		UnzipXMLSizeLimit: min(limit, 64<<20),
	})
	if err != nil {
		return "", 0, damaged(x.name, what, fmt.Errorf("its workbook could not be opened: %v", err))
	}
	defer f.Close()
	sheets := f.GetSheetList()
	if len(sheets) == 0 {
		return "", 0, damaged(x.name, what, fmt.Errorf("it lists no sheets"))
	}
	if err := x.checkPages(len(sheets), "sheets"); err != nil {
		return "", 0, err
	}
	var b strings.Builder
	for i, sheet := range sheets {
		if err := x.check(); err != nil {
			return "", 0, err
		}
		rows, err := x.sheetRows(f, sheet)
		if err != nil {
			return "", 0, err
		}
		if i > 0 {
			b.WriteString("\n\n")
		}
		title := "## Sheet: " + sheet
		if visible, err := f.GetSheetVisible(sheet); err == nil && !visible {
			title += " (hidden)"
		}
		b.WriteString(title + "\n\n")
		if table := markdownTable(rows); table != "" {
			b.WriteString(table)
		} else {
			b.WriteString("(empty sheet)")
		}
		x.report(int64(i+1), int64(len(sheets)), "sheets")
	}
	return b.String(), len(sheets), nil
}

// sheetRows streams a sheet's rows, checking the context as it goes.
func (x *extraction) sheetRows(f *excelize.File, sheet string) ([][]string, error) {
	rows, err := f.Rows(sheet)
	if err != nil {
		return nil, damaged(x.name, "Excel workbook", fmt.Errorf("sheet %q: %v", sheet, err))
	}
	defer rows.Close()
	var out [][]string
	for i := 0; rows.Next(); i++ {
		if i%1024 == 0 {
			if err := x.check(); err != nil {
				return nil, err
			}
		}
		cols, err := rows.Columns()
		if err != nil {
			return nil, damaged(x.name, "Excel workbook", fmt.Errorf("sheet %q, row %d: %v", sheet, i+1, err))
		}
		// Only up to the last value: a row with one cell in column XFD
		// comes back as 16,384 strings, which kept for every row of a
		// long sheet would take gigabytes.
		cols = cols[:usedCells(cols)]
		// Every value counts against MaxChars as it is read, a cell
		// (empty or not) as one character at least: its column's pipe. One
		// shared string in 200,000 cells is 200,000 times its text.
		for _, c := range cols {
			if err := x.spend(1 + utf8.RuneCountInString(c)); err != nil {
				return nil, err
			}
		}
		out = append(out, slices.Clone(cols))
	}
	if err := rows.Error(); err != nil {
		return nil, damaged(x.name, "Excel workbook", fmt.Errorf("sheet %q: %v", sheet, err))
	}
	return out, nil
}

// checkWorkbookText counts, from the workbook's XML and streamed, the
// characters its cells show (a shared string once for every cell that
// shows it, and one for each cell), and refuses a workbook over MaxChars
// before excelize reads it: excelize builds each row's values at once, a
// shared string copied for every cell, so one row of 16,384 cells that
// show a long rich-text string would take gigabytes before any of it
// could be counted.
func (x *extraction) checkWorkbookText(zr *zip.Reader, what string) error {
	if x.limits.MaxChars <= 0 {
		return nil
	}
	var lengths []int32 // characters of each shared string
	if f := sharedStringsPart(zr); f != nil {
		n, inT, phonetic := 0, false, 0
		err := x.walkPart(f, what, func(d *xml.Decoder, t xml.Token) error {
			switch t := t.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "si":
					n = 0
				case "t":
					inT = true
				case "rPh": // phonetic guides, which excelize does not show
					phonetic++
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "si":
					lengths = append(lengths, int32(min(n, math.MaxInt32)))
				case "t":
					inT = false
				case "rPh":
					phonetic--
				}
			case xml.CharData:
				if inT && phonetic == 0 {
					n += utf8.RuneCount(t)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	total := 0
	for _, f := range zr.File {
		name := strings.ToLower(f.Name)
		if !strings.HasPrefix(name, "xl/worksheets/") || !strings.HasSuffix(name, ".xml") {
			continue
		}
		var cellType string
		var index []byte // a shared string's index
		chars := 0       // the characters of any other value
		inCell, inValue := false, false
		err := x.walkPart(f, what, func(d *xml.Decoder, t xml.Token) error {
			switch t := t.(type) {
			case xml.StartElement:
				switch t.Name.Local {
				case "c":
					inCell, cellType, index, chars = true, attr(t, "t"), index[:0], 0
				case "v", "t":
					inValue = inCell
				}
			case xml.EndElement:
				switch t.Name.Local {
				case "v", "t":
					inValue = false
				case "c":
					if cellType == "s" {
						chars = 0
						if i, err := strconv.Atoi(strings.TrimSpace(string(index))); err == nil && i >= 0 && i < len(lengths) {
							chars = int(lengths[i])
						}
					}
					inCell = false
					if total += 1 + chars; total > x.limits.MaxChars {
						return textLimit(x.name, x.limits.MaxChars)
					}
				}
			case xml.CharData:
				switch {
				case !inValue:
				case cellType == "s":
					if len(index) < 32 {
						index = append(index, t[:min(len(t), 32)]...)
					}
				default:
					chars += utf8.RuneCount(t)
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// sharedStringsPart finds the workbook's shared strings, where Excel puts
// them or under another case of the name.
func sharedStringsPart(zr *zip.Reader) *zip.File {
	if f := zipFile(zr, "xl/sharedStrings.xml"); f != nil {
		return f
	}
	for _, f := range zr.File {
		if strings.HasSuffix(strings.ToLower(f.Name), "/sharedstrings.xml") {
			return f
		}
	}
	return nil
}
