package docs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
)

// Format is what a document was read as.
type Format string

// The formats Extract reads.
const (
	FormatText     Format = "text"
	FormatMarkdown Format = "markdown"
	FormatCode     Format = "code"
	FormatCSV      Format = "csv"
	FormatTSV      Format = "tsv"
	FormatJSON     Format = "json"
	FormatHTML     Format = "html"
	FormatPDF      Format = "pdf"
	FormatDOCX     Format = "docx"
	FormatXLSX     Format = "xlsx"
	FormatEPUB     Format = "epub"
	FormatRTF      Format = "rtf"
)

// Limits bound one extraction. A zero field takes its default (the
// Default* constants); a negative one turns that limit off.
type Limits struct {
	// MaxBytes is the largest file read.
	MaxBytes int64
	// MaxPages bounds PDF pages, XLSX sheets and EPUB chapters.
	MaxPages int
	// Timeout bounds the whole extraction.
	Timeout time.Duration
	// MaxUnpackedBytes bounds the total unpacked size of the parts of a
	// ZIP-based document (DOCX, XLSX, EPUB), as its directory declares
	// them; archive/zip refuses a part that unpacks to more than declared.
	MaxUnpackedBytes int64
	// MaxZipEntries bounds the number of parts of a ZIP-based document.
	MaxZipEntries int
	// MaxChars bounds the characters of the extracted text: a document
	// whose text would be longer is refused (ErrTextLimit) as soon as its
	// text passes the bound, so that a small file made to expand (a
	// chapter or a cell repeated thousands of times) never fills memory.
	MaxChars int
	// MaxTokens bounds the text's length in the model's tokens, which
	// NewAttachment counts; counting stops as soon as it passes the bound.
	MaxTokens int
}

// Default limits: a 100 MB file, 2,000 pages, two minutes, 500 MB unpacked
// and 20,000 parts hold every real document we know of (a 50 MB text file
// reads in well under a second), while a decompression bomb or a
// pathological file fails fast.
//
// The text of one document is bounded at 16 million characters and 4
// million tokens: four times the longest novels, and 15 times the largest
// context the model takes (262,144 tokens), so that a document still fits
// whole for the choice to keep its beginning or its end. Text that long
// takes at most 64 MB (four bytes a character), which keeps an extraction
// well inside a few hundred megabytes whatever the file.
const (
	DefaultMaxBytes         = 100 << 20
	DefaultMaxPages         = 2000
	DefaultTimeout          = 2 * time.Minute
	DefaultMaxUnpackedBytes = 500 << 20
	DefaultMaxZipEntries    = 20000
	DefaultMaxChars         = 16_000_000
	DefaultMaxTokens        = 4_000_000
)

func (l Limits) withDefaults() Limits {
	if l.MaxBytes == 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxPages == 0 {
		l.MaxPages = DefaultMaxPages
	}
	if l.Timeout == 0 {
		l.Timeout = DefaultTimeout
	}
	if l.MaxUnpackedBytes == 0 {
		l.MaxUnpackedBytes = DefaultMaxUnpackedBytes
	}
	if l.MaxZipEntries == 0 {
		l.MaxZipEntries = DefaultMaxZipEntries
	}
	if l.MaxChars == 0 {
		l.MaxChars = DefaultMaxChars
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = DefaultMaxTokens
	}
	return l
}

// Progress is how far an extraction has come. Done and Total count Unit
// ("bytes", "pages", "sheets" or "chapters"); Total is 0 when unknown.
type Progress struct {
	Name  string
	Stage string // "reading" the file or "extracting" its text
	Done  int64
	Total int64
	Unit  string
}

// Options configure Extract. The zero value works.
type Options struct {
	Limits Limits
	// Progress, when set, is called from the extracting goroutine as work
	// advances (at most every megabyte or page); it must return quickly.
	Progress func(Progress)
	// Encoding, when set, is the character encoding a text file (plain
	// text, Markdown, source code, CSV, TSV, JSON) is decoded from instead
	// of the detected one: one of TextEncodings, as the user chose it when
	// the detection read the file wrong. Other formats ignore it.
	Encoding string
}

// Document is one extracted document.
type Document struct {
	Name   string // the file's base name
	Format Format
	// Type names the format for people ("PDF document").
	Type string
	// Text is what the model reads.
	Text string
	// Size is the file's size in bytes and SHA256 its hex digest: what
	// identifies the original file once only the text is kept.
	Size   int64
	SHA256 string
	// Pages counts PageUnit: PDF pages, XLSX sheets or EPUB chapters; 0
	// for formats without pages.
	Pages    int
	PageUnit string
	// Encoding is the character encoding a text file was decoded from
	// ("UTF-8", "Shift_JIS", …); empty for binary formats.
	Encoding string
	// Notes are things the user should know that did not stop the
	// extraction (a page without text, a skipped part); each also appears
	// in Text where it applies.
	Notes []string
	// maxTokens is the MaxTokens limit the document was extracted under,
	// for NewAttachment (0: the default).
	maxTokens int
}

// ExtractFile reads the file at path and extracts it; see Extract. Only a
// regular file (or a link to one) is read: a folder, a device, a named
// pipe or a socket is refused before it is opened (ErrNotAFile), since
// reading one never ends or blocks. Limits.Timeout covers opening and
// reading the file too, and ExtractFile returns when it passes even if
// the system is still busy opening or reading it.
func ExtractFile(ctx context.Context, path string, opts Options) (*Document, error) {
	name := filepath.Base(path)
	limits := opts.Limits.withDefaults()
	if limits.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, limits.Timeout, ErrTimeLimit)
		defer cancel()
	}
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		data, err := readFile(ctx, path, name, limits, opts.Progress)
		done <- result{data, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			if ctx.Err() != nil {
				return nil, stopped(ctx, name, limits.Timeout)
			}
			return nil, r.err
		}
		return Extract(ctx, name, r.data, opts)
	case <-ctx.Done():
		return nil, stopped(ctx, name, limits.Timeout)
	}
}

// readFile opens and reads a regular file, refusing anything else before
// opening it, and again after (it may have been replaced in between; it
// is opened without blocking, so that a named pipe put there cannot hang
// the open).
func readFile(ctx context.Context, path, name string, limits Limits, progress func(Progress)) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, openError(name, err)
	}
	if err := checkRegular(name, st); err != nil {
		return nil, err
	}
	f, err := openNoBlock(path)
	if err != nil {
		return nil, openError(name, err)
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, openError(name, err)
	}
	if err := checkRegular(name, st); err != nil {
		return nil, err
	}
	if limits.MaxBytes > 0 && st.Size() > limits.MaxBytes {
		return nil, tooLarge(name, st.Size(), limits.MaxBytes)
	}
	return readAll(ctx, name, f, st.Size(), limits.MaxBytes, progress)
}

// checkRegular refuses what is not a regular file, saying what it is.
func checkRegular(name string, st os.FileInfo) error {
	mode := st.Mode()
	switch {
	case mode.IsRegular():
		return nil
	case mode.IsDir():
		return failure(name, ErrNotAFile, "is a folder; attach the files inside it instead")
	case mode&os.ModeNamedPipe != 0:
		return failure(name, ErrNotAFile, "is a named pipe, not a file; save what it carries to a file and attach that")
	case mode&os.ModeSocket != 0:
		return failure(name, ErrNotAFile, "is a socket, not a file; only files can be attached")
	case mode&os.ModeDevice != 0:
		return failure(name, ErrNotAFile, "is a device, not a file; only files can be attached")
	default:
		return failure(name, ErrNotAFile, "is not a regular file; only files can be attached")
	}
}

// openError says in plain words why a file could not be opened or read.
func openError(name string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is the name already said
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Name: name, Kind: fs.ErrNotExist, Message: "does not exist (it may have been moved or deleted); check its name and folder"}
	case errors.Is(err, fs.ErrPermission):
		return &Error{Name: name, Kind: fs.ErrPermission, Message: "may not be read (permission denied); allow reading it, or copy it to a folder of yours and attach the copy"}
	}
	return &Error{Name: name, Kind: err, Message: fmt.Sprintf("could not be opened (%v)", err)}
}

// readAll reads a file with progress, checking ctx between chunks.
func readAll(ctx context.Context, name string, r io.Reader, size, limit int64, progress func(Progress)) ([]byte, error) {
	const chunk = 1 << 20
	data := make([]byte, 0, max(size, 0)+1)
	for {
		if err := ctx.Err(); err != nil {
			return nil, stopped(ctx, name, 0)
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
		n, err := r.Read(data[len(data):min(cap(data), len(data)+chunk)])
		data = data[:len(data)+n]
		if limit > 0 && int64(len(data)) > limit {
			return nil, tooLarge(name, int64(len(data)), limit)
		}
		if progress != nil && n > 0 {
			progress(Progress{Name: name, Stage: "reading", Done: int64(len(data)), Total: size, Unit: "bytes"})
		}
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err // the path is the name already said
			}
			return nil, &Error{Name: name, Kind: err, Message: fmt.Sprintf("could not be read (%v); check the disk it is on, or copy it elsewhere and attach the copy", err)}
		}
	}
}

func tooLarge(name string, size, limit int64) *Error {
	return failure(name, ErrTooLarge, "is %s, over the %s limit for a document; attach a smaller part of it", bytesize.Format(size), bytesize.Format(limit))
}

// Extract reads data, the content of a file called name, and returns the
// text the model reads. The format comes from the content first and from
// name's extension where the content does not decide it.
//
// The work runs on its own goroutine: Extract returns as soon as ctx is
// cancelled or Limits.Timeout passes, with an error that wraps
// context.Canceled or ErrTimeLimit, even if a parser is still busy (it
// then stops at its next check and its result is dropped).
func Extract(ctx context.Context, name string, data []byte, opts Options) (*Document, error) {
	name = filepath.Base(name)
	limits := opts.Limits.withDefaults()
	if limits.MaxBytes > 0 && int64(len(data)) > limits.MaxBytes {
		return nil, tooLarge(name, int64(len(data)), limits.MaxBytes)
	}
	if limits.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, limits.Timeout, ErrTimeLimit)
		defer cancel()
	}
	if opts.Encoding != "" {
		if _, _, err := textEncoding(opts.Encoding); err != nil {
			return nil, err
		}
	}
	job := &extraction{ctx: ctx, name: name, data: data, limits: limits, progress: opts.Progress, encoding: opts.Encoding}
	type result struct {
		doc *Document
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{nil, failure(name, ErrInternal, "could not be read because of an error in Suzuran (%v); please report it with the file if you can", r)}
			}
		}()
		doc, err := job.run()
		done <- result{doc, err}
	}()
	select {
	case r := <-done:
		if r.err != nil && ctx.Err() != nil {
			return nil, stopped(ctx, name, limits.Timeout)
		}
		return r.doc, r.err
	case <-ctx.Done():
		return nil, stopped(ctx, name, limits.Timeout)
	}
}

// stopped is the error of an extraction whose context ended.
func stopped(ctx context.Context, name string, timeout time.Duration) error {
	if errors.Is(context.Cause(ctx), ErrTimeLimit) {
		return failure(name, ErrTimeLimit, "took longer than the %v limit for reading a document and was stopped; attach a smaller part of it", timeout)
	}
	return &Error{Name: name, Kind: ctx.Err(), Message: "extraction cancelled"}
}

// extraction is one document being read; the format extractors are its
// methods, so that each reaches the limits, the context and progress.
type extraction struct {
	ctx      context.Context
	name     string
	data     []byte
	limits   Limits
	progress func(Progress)
	encoding string // Options.Encoding
	notes    []string
	// chars counts the characters of text read so far (spend), and
	// unpacked the bytes unpacked from a ZIP container's parts.
	chars    int
	unpacked int64
}

// check returns the context's error, for loops to call between steps.
func (x *extraction) check() error {
	if x.ctx.Err() != nil {
		return stopped(x.ctx, x.name, x.limits.Timeout)
	}
	return nil
}

func (x *extraction) report(done, total int64, unit string) {
	if x.progress != nil {
		x.progress(Progress{Name: x.name, Stage: "extracting", Done: done, Total: total, Unit: unit})
	}
}

// checkPages enforces MaxPages on a count of pages, sheets or chapters.
func (x *extraction) checkPages(n int, unit string) error {
	if x.limits.MaxPages > 0 && n > x.limits.MaxPages {
		return failure(x.name, ErrTooManyPages, "has %d %s, over the limit of %d; attach a part of it (for a PDF, print the pages you need to a new PDF)", n, unit, x.limits.MaxPages)
	}
	return nil
}

// spendBytes and spendString count text against MaxChars as an extractor
// reads it, so that the extraction stops as soon as the bound is passed.
func (x *extraction) spendBytes(b []byte) error { return x.spend(utf8.RuneCount(b)) }

func (x *extraction) spendString(s string) error { return x.spend(utf8.RuneCountInString(s)) }

func (x *extraction) spend(n int) error {
	x.chars += n
	if x.limits.MaxChars > 0 && x.chars > x.limits.MaxChars {
		return textLimit(x.name, x.limits.MaxChars)
	}
	return nil
}

// textLimit is the error of a document whose text is over MaxChars.
func textLimit(name string, limit int) *Error {
	return failure(name, ErrTextLimit, "has more than %s characters of text, the limit for one document (far more than the model can read at once); attach the part you need", thousands(limit))
}

func (x *extraction) note(format string, args ...any) string {
	s := fmt.Sprintf(format, args...)
	x.notes = append(x.notes, s)
	return s
}

func (x *extraction) run() (*Document, error) {
	if err := x.check(); err != nil {
		return nil, err
	}
	if len(x.data) == 0 {
		return nil, failure(x.name, ErrEmpty, "is empty (0 bytes): there is nothing to attach")
	}
	kind, err := detect(x.name, x.data)
	if err != nil {
		return nil, err
	}
	doc := &Document{Name: x.name, Format: kind.format, Type: kind.typeName, Size: int64(len(x.data))}
	sum := sha256.Sum256(x.data)
	doc.SHA256 = hex.EncodeToString(sum[:])
	switch kind.format {
	case FormatText, FormatMarkdown:
		doc.Text, doc.Encoding, err = x.plainText()
	case FormatCode:
		doc.Text, doc.Encoding, err = x.code(kind.language)
	case FormatCSV, FormatTSV:
		doc.Text, doc.Encoding, err = x.csv(kind.format == FormatTSV)
	case FormatJSON:
		doc.Text, doc.Encoding, err = x.json()
	case FormatHTML:
		doc.Text, doc.Encoding, err = x.html()
	case FormatPDF:
		doc.Text, doc.Pages, err = x.pdf()
		doc.PageUnit = "pages"
	case FormatDOCX:
		doc.Text, err = x.docx()
	case FormatXLSX:
		doc.Text, doc.Pages, err = x.xlsx()
		doc.PageUnit = "sheets"
	case FormatEPUB:
		doc.Text, doc.Pages, err = x.epub()
		doc.PageUnit = "chapters"
	case FormatRTF:
		doc.Text, err = x.rtf()
	default:
		err = fmt.Errorf("%s: no extractor for format %q", x.name, kind.format)
	}
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(doc.Text) == "" {
		return nil, failure(x.name, ErrEmpty, "holds no text (it is a %s with nothing written in it)", kind.typeName)
	}
	// What the extractors counted on the way is the text they read; the
	// text written (table pipes, list marks, headings) is checked whole.
	if x.limits.MaxChars > 0 && utf8.RuneCountInString(doc.Text) > x.limits.MaxChars {
		return nil, textLimit(x.name, x.limits.MaxChars)
	}
	doc.Notes = x.notes
	doc.maxTokens = x.limits.MaxTokens
	return doc, nil
}
