package docs

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/suzuran-app/suzuran/app/internal/bytesize"
)

// openZip opens a ZIP-based document after checking its directory against
// the limits: the number of parts and their total unpacked size. The sizes
// come from the directory; archive/zip then fails any part whose data
// unpacks to more than its declared size, so the check holds for a file
// that lies about them too.
func (x *extraction) openZip(what string) (*zip.Reader, error) {
	zr, err := zip.NewReader(bytes.NewReader(x.data), int64(len(x.data)))
	if err != nil {
		return nil, damaged(x.name, what, fmt.Errorf("it is not a readable ZIP container: %v", err))
	}
	if x.limits.MaxZipEntries > 0 && len(zr.File) > x.limits.MaxZipEntries {
		return nil, failure(x.name, ErrUnpackLimit, "holds %d parts, over the limit of %d for a %s; it may be a decompression bomb, and was not read", len(zr.File), x.limits.MaxZipEntries, what)
	}
	var total uint64
	for _, f := range zr.File {
		total += f.UncompressedSize64
		if x.limits.MaxUnpackedBytes > 0 && total > uint64(x.limits.MaxUnpackedBytes) {
			return nil, failure(x.name, ErrUnpackLimit, "would unpack to more than %s (the limit for a %s); it may be a decompression bomb, and was not read", bytesize.Format(x.limits.MaxUnpackedBytes), what)
		}
	}
	return zr, nil
}

// zipFile finds a part by name; ZIP names are case-sensitive but some
// writers vary the case of the OOXML parts, so a case-insensitive match is
// the fallback.
func zipFile(zr *zip.Reader, name string) *zip.File {
	name = strings.TrimPrefix(name, "/")
	for _, f := range zr.File {
		if f.Name == name {
			return f
		}
	}
	for _, f := range zr.File {
		if strings.EqualFold(f.Name, name) {
			return f
		}
	}
	return nil
}

// openPart opens one part for reading as a stream. What it unpacks counts
// against MaxUnpackedBytes across all the parts read, so that a document
// that makes the extractor read one part many times (an EPUB whose spine
// lists a chapter again and again under other names) cannot multiply the
// work the directory check allowed.
func (x *extraction) openPart(f *zip.File, what string) (io.ReadCloser, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, damaged(x.name, what, fmt.Errorf("part %s: %v", f.Name, err))
	}
	return &partReader{ReadCloser: rc, x: x, part: f.Name, what: what}, nil
}

// partReader is an open part: its reads count against the unpacked budget
// and fail once it is spent.
type partReader struct {
	io.ReadCloser
	x    *extraction
	part string
	what string
}

func (p *partReader) Read(b []byte) (int, error) {
	n, err := p.ReadCloser.Read(b)
	p.x.unpacked += int64(n)
	if limit := p.x.limits.MaxUnpackedBytes; limit > 0 && p.x.unpacked > limit {
		return n, failure(p.x.name, ErrUnpackLimit, "unpacks to more than %s (the limit for a %s) while part %s is read; it may be a decompression bomb, and was not read", bytesize.Format(limit), p.what, p.part)
	}
	if err != nil && err != io.EOF {
		err = damaged(p.x.name, p.what, fmt.Errorf("part %s: %v", p.part, err))
	}
	return n, err
}

// walkPart streams the XML tokens of one part to visit (see walkXML).
func (x *extraction) walkPart(f *zip.File, what string, visit func(*xml.Decoder, xml.Token) error) error {
	rc, err := x.openPart(f, what)
	if err != nil {
		return err
	}
	defer rc.Close()
	return x.walkXML(rc, f.Name, visit)
}

// maxRun bounds the bytes between two '<' of an XML or XHTML part: the
// longest text or tag a parser holds at once. No real document has 16 MB
// of text without a single tag (Word splits text into runs and
// paragraphs, a book into paragraphs); a part that does is made to fill
// memory.
const maxRun = 16 << 20

// runGuard fails a read once more than maxRun bytes pass without a '<'.
type runGuard struct {
	r   io.Reader
	run int
	err error // returned once the run is too long
}

func (g *runGuard) Read(b []byte) (int, error) {
	n, err := g.r.Read(b)
	if i := bytes.IndexByte(b[:n], '<'); i < 0 {
		g.run += n
	} else if g.run += i; g.run <= maxRun {
		g.run = n - bytes.LastIndexByte(b[:n], '<') - 1
	}
	if g.run > maxRun {
		return 0, g.err
	}
	return n, err
}

// xmlDecoder reads an XML part of a document. Go's encoding/xml never
// loads external entities or expands entities a DTD declares, so such a
// part would fail on its first entity reference anyway; a DOCTYPE is
// refused up front instead (checkDirective), with a message that says why,
// since no Office or EPUB writer produces one with entity declarations.
func xmlDecoder(r io.Reader) *xml.Decoder {
	d := xml.NewDecoder(r)
	d.Strict = true
	return d
}

// errDoctype is returned by checkDirective for a DOCTYPE with declarations.
var errDoctype = errors.New("DOCTYPE with declarations")

// checkDirective refuses DOCTYPEs that declare entities or name external
// files; a bare <!DOCTYPE html> (XHTML in EPUBs) is harmless.
func checkDirective(d xml.Directive) error {
	s := strings.TrimSpace(string(d))
	if !strings.HasPrefix(strings.ToUpper(s), "DOCTYPE") {
		return nil
	}
	if strings.ContainsAny(s, "[") || strings.Contains(strings.ToUpper(s), "SYSTEM") || strings.Contains(s, "ENTITY") {
		return errDoctype
	}
	return nil
}

// unsafeXML is the error of a part with a DOCTYPE that declares entities.
func (x *extraction) unsafeXML(part string) *Error {
	return failure(x.name, ErrUnsafe, "part %s declares XML entities (a DOCTYPE), which Office and EPUB writers never do and which can be used to read files from this computer; it was not read", part)
}
