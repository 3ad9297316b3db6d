package docs

import (
	"archive/zip"
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
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
			return nil, failure(x.name, ErrUnpackLimit, "would unpack to more than %s (the limit for a %s); it may be a decompression bomb, and was not read", FormatBytes(x.limits.MaxUnpackedBytes), what)
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

// readZipFile reads one part whole. The limit repeats the directory check,
// in case a part is read from an archive that was not opened by openZip.
func (x *extraction) readZipFile(f *zip.File, what string) ([]byte, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, damaged(x.name, what, fmt.Errorf("part %s: %v", f.Name, err))
	}
	defer rc.Close()
	limit := x.limits.MaxUnpackedBytes
	if limit <= 0 {
		limit = 1 << 62
	}
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, damaged(x.name, what, fmt.Errorf("part %s: %v", f.Name, err))
	}
	if int64(len(data)) > limit {
		return nil, failure(x.name, ErrUnpackLimit, "part %s unpacks to more than %s; it may be a decompression bomb, and was not read", f.Name, FormatBytes(limit))
	}
	return data, nil
}

// xmlDecoder reads an XML part of a document. Go's encoding/xml never
// loads external entities or expands entities a DTD declares, so such a
// part would fail on its first entity reference anyway; a DOCTYPE is
// refused up front instead (checkDirective), with a message that says why,
// since no Office or EPUB writer produces one with entity declarations.
func xmlDecoder(data []byte) *xml.Decoder {
	d := xml.NewDecoder(bytes.NewReader(data))
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
