package docs

import (
	"bytes"
	"fmt"
	"slices"
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
	if _, err := x.openZip(what); err != nil {
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
