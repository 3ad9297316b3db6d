package docs

import (
	"archive/zip"
	"encoding/xml"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// epub reads an EPUB book: META-INF/container.xml names the package
// document, whose spine lists the chapters in reading order; each
// chapter's XHTML goes through the HTML extractor. The title and authors
// head the text. Chapters listed in META-INF/encryption.xml are under DRM
// and refused (font obfuscation, which lists only fonts, is not).
//
// The container and package documents are small XML files read with
// encoding/xml: the Go EPUB libraries are writers, or readers that parse
// the same two files with less care about limits.
func (x *extraction) epub() (string, int, error) {
	const what = "EPUB book"
	zr, err := x.openZip(what)
	if err != nil {
		return "", 0, err
	}
	container := zipFile(zr, "META-INF/container.xml")
	if container == nil {
		return "", 0, damaged(x.name, what, fmt.Errorf("it has no META-INF/container.xml"))
	}
	var opfPath string
	err = x.walkPart(container, what, func(d *xml.Decoder, t xml.Token) error {
		if se, ok := t.(xml.StartElement); ok && se.Name.Local == "rootfile" && opfPath == "" {
			opfPath = attr(se, "full-path")
		}
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	opf := zipFile(zr, opfPath)
	if opfPath == "" || opf == nil {
		return "", 0, damaged(x.name, what, fmt.Errorf("its container names no package document it holds (%q)", opfPath))
	}
	pkg, err := x.readPackage(opf, what)
	if err != nil {
		return "", 0, err
	}
	encrypted, err := x.encryptedParts(zipFile(zr, "META-INF/encryption.xml"), what)
	if err != nil {
		return "", 0, err
	}
	if err := x.checkPages(len(pkg.spine), "chapters"); err != nil {
		return "", 0, err
	}
	base := path.Dir(opf.Name)
	var b strings.Builder
	if pkg.title != "" {
		b.WriteString("# " + pkg.title + "\n")
		if len(pkg.authors) > 0 {
			b.WriteString("\nBy " + strings.Join(pkg.authors, ", ") + "\n")
		}
	}
	chapters := 0
	read, repeats := map[string]bool{}, 0
	for i, href := range pkg.spine {
		if err := x.check(); err != nil {
			return "", 0, err
		}
		name := resolveHref(base, href)
		if encrypted[name] {
			return "", 0, failure(x.name, ErrEncrypted, "is protected by DRM (its chapters are encrypted); only DRM-free books can be attached")
		}
		f := zipFile(zr, name)
		if f == nil {
			x.note("chapter %s is listed in the book but missing from it", name)
			continue
		}
		// A chapter is read once, however often the spine lists it (under
		// one id or many): EPUB allows each item in the spine once, and a
		// book that repeats one is made to multiply its text.
		if read[f.Name] {
			repeats++
			continue
		}
		read[f.Name] = true
		text, err := x.chapterText(f, what)
		if err != nil {
			return "", 0, err
		}
		chapters++
		x.report(int64(i+1), int64(len(pkg.spine)), "chapters")
		if text == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(text + "\n")
	}
	if repeats > 0 {
		x.note("the book lists chapters it has already listed %d more times; each chapter was read once", repeats)
	}
	return strings.TrimSpace(b.String()), chapters, nil
}

// chapterText streams one chapter's XHTML through the HTML extractor.
func (x *extraction) chapterText(f *zip.File, what string) (string, error) {
	rc, err := x.openPart(f, what)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	return x.htmlText(rc, true)
}

type epubPackage struct {
	title   string
	authors []string
	spine   []string // hrefs, relative to the package document
}

func (x *extraction) readPackage(opf *zip.File, what string) (*epubPackage, error) {
	manifest := map[string]string{}
	var idrefs []string
	pkg := &epubPackage{}
	var inTitle, inCreator bool
	err := x.walkPart(opf, what, func(d *xml.Decoder, t xml.Token) error {
		switch t := t.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "item":
				manifest[attr(t, "id")] = attr(t, "href")
			case "itemref":
				if attr(t, "linear") != "no" {
					idrefs = append(idrefs, attr(t, "idref"))
				}
			case "title":
				inTitle = pkg.title == ""
			case "creator":
				inCreator = true
				pkg.authors = append(pkg.authors, "")
			}
		case xml.EndElement:
			inTitle, inCreator = false, false
		case xml.CharData:
			if inTitle {
				pkg.title += strings.TrimSpace(string(t))
			}
			if inCreator {
				pkg.authors[len(pkg.authors)-1] += strings.TrimSpace(string(t))
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for _, id := range idrefs {
		if href, ok := manifest[id]; ok {
			pkg.spine = append(pkg.spine, href)
		}
	}
	if len(pkg.spine) == 0 {
		return nil, damaged(x.name, what, fmt.Errorf("its spine lists no chapters"))
	}
	return pkg, nil
}

// encryptedParts lists the parts encryption.xml names, other than fonts.
func (x *extraction) encryptedParts(f *zip.File, what string) (map[string]bool, error) {
	parts := map[string]bool{}
	if f == nil {
		return parts, nil
	}
	err := x.walkPart(f, what, func(d *xml.Decoder, t xml.Token) error {
		if se, ok := t.(xml.StartElement); ok && se.Name.Local == "CipherReference" {
			if uri := attr(se, "URI"); uri != "" {
				parts[resolveHref("", uri)] = true
			}
		}
		return nil
	})
	return parts, err
}

// resolveHref turns an href relative to dir into a part name. It only
// names a part inside the ZIP; nothing outside the book is ever opened.
func resolveHref(dir, href string) string {
	if u, err := url.PathUnescape(href); err == nil {
		href = u
	}
	href, _, _ = strings.Cut(href, "#")
	return strings.TrimPrefix(path.Clean(path.Join(dir, href)), "/")
}
