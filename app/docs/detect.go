package docs

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/gabriel-vasile/mimetype"
)

// kind is what detect decided a file is.
type kind struct {
	format   Format
	typeName string // for people: "PDF document"
	language string // for FormatCode: the fence's language name
}

// The binary formats Extract reads, by extension and by MIME type.
var binaryKinds = map[string]kind{
	".pdf":  {FormatPDF, "PDF document", ""},
	".docx": {FormatDOCX, "Word document", ""},
	".xlsx": {FormatXLSX, "Excel workbook", ""},
	".epub": {FormatEPUB, "EPUB book", ""},
	".rtf":  {FormatRTF, "RTF document", ""},
}

var mimeKinds = map[string]string{
	"application/pdf": ".pdf",
	"application/vnd.openxmlformats-officedocument.wordprocessingml.document": ".docx",
	"application/vnd.openxmlformats-officedocument.spreadsheetml.sheet":       ".xlsx",
	"application/epub+zip": ".epub",
	"text/rtf":             ".rtf",
}

// Text formats by extension.
var textKinds = map[string]kind{
	".txt":      {FormatText, "text file", ""},
	".text":     {FormatText, "text file", ""},
	".log":      {FormatText, "log file", ""},
	".md":       {FormatMarkdown, "Markdown document", ""},
	".markdown": {FormatMarkdown, "Markdown document", ""},
	".csv":      {FormatCSV, "CSV table", ""},
	".tsv":      {FormatTSV, "TSV table", ""},
	".tab":      {FormatTSV, "TSV table", ""},
	".json":     {FormatJSON, "JSON file", ""},
	".html":     {FormatHTML, "HTML page", ""},
	".htm":      {FormatHTML, "HTML page", ""},
	".xhtml":    {FormatHTML, "HTML page", ""},
}

// Source code by extension: the value is the language named on the fence.
var codeLanguages = map[string]string{
	".go": "go", ".py": "python", ".pyi": "python", ".js": "javascript", ".mjs": "javascript",
	".cjs": "javascript", ".jsx": "jsx", ".ts": "typescript", ".tsx": "tsx", ".java": "java",
	".kt": "kotlin", ".kts": "kotlin", ".scala": "scala", ".swift": "swift", ".m": "objective-c",
	".mm": "objective-cpp", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp", ".cxx": "cpp",
	".hpp": "cpp", ".hh": "cpp", ".cs": "csharp", ".fs": "fsharp", ".rs": "rust", ".rb": "ruby",
	".php": "php", ".pl": "perl", ".pm": "perl", ".lua": "lua", ".r": "r", ".jl": "julia",
	".sh": "sh", ".bash": "bash", ".zsh": "zsh", ".fish": "fish", ".ps1": "powershell",
	".sql": "sql", ".css": "css", ".scss": "scss", ".sass": "sass", ".less": "less",
	".vue": "vue", ".svelte": "svelte", ".xml": "xml", ".svg": "xml", ".yaml": "yaml",
	".yml": "yaml", ".toml": "toml", ".ini": "ini", ".cfg": "ini", ".conf": "conf",
	".proto": "protobuf", ".graphql": "graphql", ".dart": "dart", ".ex": "elixir",
	".exs": "elixir", ".erl": "erlang", ".hs": "haskell", ".ml": "ocaml", ".clj": "clojure",
	".lisp": "lisp", ".el": "elisp", ".vim": "vim", ".zig": "zig", ".nim": "nim",
	".tex": "latex", ".bib": "bibtex", ".diff": "diff", ".patch": "diff", ".metal": "metal",
	".cu": "cuda", ".glsl": "glsl", ".hlsl": "hlsl", ".wgsl": "wgsl", ".tf": "hcl",
	".gradle": "groovy", ".groovy": "groovy", ".bat": "bat", ".cmake": "cmake", ".mk": "make",
	".jinja": "jinja", ".j2": "jinja", ".ipynb": "json",
}

// Source files known by their whole name.
var codeNames = map[string]string{
	"makefile": "make", "gnumakefile": "make", "dockerfile": "dockerfile",
	"containerfile": "dockerfile", "cmakelists.txt": "cmake", "go.mod": "go.mod",
	"gemfile": "ruby", "rakefile": "ruby", "justfile": "just", "vagrantfile": "ruby",
}

// Interpreters named by a #! line.
var shebangLanguages = map[string]string{
	"sh": "sh", "bash": "bash", "zsh": "zsh", "dash": "sh", "ksh": "sh", "fish": "fish",
	"python": "python", "python2": "python", "python3": "python", "perl": "perl",
	"ruby": "ruby", "node": "javascript", "deno": "typescript", "bun": "javascript",
	"lua": "lua", "php": "php", "Rscript": "r", "tclsh": "tcl", "awk": "awk",
}

var goPackageLine = regexp.MustCompile(`(?m)^package [A-Za-z_][A-Za-z0-9_]*\s*$`)

// Names for people of the types refused, by MIME type or its top level.
var refusedNames = map[string]string{
	"application/zip":                                "ZIP archive",
	"application/x-7z-compressed":                    "7-Zip archive",
	"application/x-rar-compressed":                   "RAR archive",
	"application/gzip":                               "gzip archive",
	"application/x-tar":                              "tar archive",
	"application/x-bzip2":                            "bzip2 archive",
	"application/x-xz":                               "xz archive",
	"application/msword":                             "Word 97–2003 document (.doc)",
	"application/vnd.ms-excel":                       "Excel 97–2003 workbook (.xls)",
	"application/vnd.ms-powerpoint":                  "PowerPoint 97–2003 presentation (.ppt)",
	"application/x-ole-storage":                      "Microsoft Office 97–2003 file",
	"application/vnd.oasis.opendocument.text":        "OpenDocument text (.odt)",
	"application/vnd.oasis.opendocument.spreadsheet": "OpenDocument spreadsheet (.ods)",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": "PowerPoint presentation (.pptx)",
	"application/x-mach-binary":                     "macOS program",
	"application/x-executable":                      "program",
	"application/x-elf":                             "program",
	"application/vnd.microsoft.portable-executable": "Windows program",
	"application/x-apple-diskimage":                 "disk image",
	"application/x-sqlite3":                         "SQLite database",
	"application/octet-stream":                      "binary file of unknown type",
}

// detect decides how to read a file from its content and name.
func detect(name string, data []byte) (kind, error) {
	ext := strings.ToLower(filepath.Ext(name))
	mime := mimetype.Detect(data)
	if want, ok := mimeKinds[mime.String()]; ok {
		return binaryKinds[want], nil
	}
	expected, claimsBinary := binaryKinds[ext]
	if bytes.HasPrefix(data, []byte("PK\x03\x04")) || bytes.HasPrefix(data, []byte("PK\x05\x06")) {
		// A ZIP the sniffer could not place (its first part is not the
		// usual one): the extension decides, and the extractor checks.
		if claimsBinary && expected.format != FormatPDF && expected.format != FormatRTF {
			return expected, nil
		}
	}
	if !isText(data) {
		if (expected.format == FormatDOCX || expected.format == FormatXLSX) && isEncryptedOffice(data) {
			return kind{}, failure(name, ErrEncrypted, "is protected by a password (Office keeps such files encrypted); open it, remove the password, save it and attach that copy")
		}
		if claimsBinary {
			return kind{}, damaged(name, expected.typeName, fmt.Errorf("its content is a %s", refusedName(mime)))
		}
		return kind{}, refused(name, mime)
	}
	// Text from here on.
	if claimsBinary {
		return kind{}, damaged(name, expected.typeName, fmt.Errorf("it is plain text, not a %s", expected.typeName))
	}
	if k, ok := textKinds[ext]; ok {
		return k, nil
	}
	if lang, ok := codeLanguages[ext]; ok {
		return kind{FormatCode, "source code", lang}, nil
	}
	if lang, ok := codeNames[strings.ToLower(filepath.Base(name))]; ok {
		return kind{FormatCode, "source code", lang}, nil
	}
	return sniffText(data), nil
}

// sniffText decides what a text file with an unknown extension holds.
func sniffText(data []byte) kind {
	head := data[:min(len(data), 4096)]
	head = bytes.TrimPrefix(head, []byte("\xef\xbb\xbf"))
	if bytes.HasPrefix(head, []byte("#!")) {
		line, _, _ := bytes.Cut(head[2:], []byte("\n"))
		fields := strings.Fields(string(line))
		if len(fields) > 0 {
			interp := filepath.Base(fields[0])
			if interp == "env" {
				interp = ""
				for _, f := range fields[1:] {
					if !strings.HasPrefix(f, "-") {
						interp = f
						break
					}
				}
			}
			if lang, ok := shebangLanguages[strings.TrimRight(interp, "0123456789.")]; ok {
				return kind{FormatCode, "source code", lang}
			}
			if lang, ok := shebangLanguages[interp]; ok {
				return kind{FormatCode, "source code", lang}
			}
			return kind{FormatCode, "script", ""}
		}
	}
	if bytes.HasPrefix(head, []byte("<?php")) {
		return kind{FormatCode, "source code", "php"}
	}
	mime := mimetype.Detect(data)
	switch {
	case mime.Is("text/html"):
		return kind{FormatHTML, "HTML page", ""}
	case mime.Is("application/json"):
		return kind{FormatJSON, "JSON file", ""}
	}
	if goPackageLine.Match(head) && bytes.Contains(data, []byte("func ")) {
		return kind{FormatCode, "source code", "go"}
	}
	if bytes.HasPrefix(head, []byte("#include")) {
		return kind{FormatCode, "source code", "c"}
	}
	return kind{FormatText, "text file", ""}
}

// isEncryptedOffice recognises a password-protected DOCX or XLSX: Office
// writes it as a Compound File (the 97–2003 container) holding a stream
// named EncryptedPackage.
func isEncryptedOffice(data []byte) bool {
	cfb := []byte{0xD0, 0xCF, 0x11, 0xE0, 0xA1, 0xB1, 0x1A, 0xE1}
	if !bytes.HasPrefix(data, cfb) {
		return false
	}
	var name []byte // "EncryptedPackage" in UTF-16LE, as directory entries hold names
	for _, c := range []byte("EncryptedPackage") {
		name = append(name, c, 0)
	}
	return bytes.Contains(data, name)
}

// isText reports whether data is text in some encoding: it starts with a
// Unicode byte order mark, or holds no NUL byte in its first 64 KB (legacy
// 8-bit and multibyte encodings never use NUL; binary formats do).
func isText(data []byte) bool {
	if _, _, ok := bomEncoding(data); ok {
		return true
	}
	head := data[:min(len(data), 64<<10)]
	return bytes.IndexByte(head, 0) < 0
}

func refusedName(mime *mimetype.MIME) string {
	s := mime.String()
	if n, ok := refusedNames[s]; ok {
		return n
	}
	top, sub, _ := strings.Cut(s, "/")
	switch top {
	case "image":
		return strings.ToUpper(strings.TrimPrefix(sub, "x-")) + " image (" + s + ")"
	case "audio":
		return "audio file (" + s + ")"
	case "video":
		return "video file (" + s + ")"
	case "font":
		return "font (" + s + ")"
	}
	for m := mime.Parent(); m != nil; m = m.Parent() {
		if n, ok := refusedNames[m.String()]; ok && m.String() != "application/octet-stream" {
			return n + " (" + s + ")"
		}
	}
	if s == "application/octet-stream" || s == "" {
		return refusedNames["application/octet-stream"]
	}
	return "file of type " + s
}

// refused is the error of a file type the model cannot read.
func refused(name string, mime *mimetype.MIME) *Error {
	typeName := refusedName(mime)
	if strings.HasPrefix(mime.String(), "image/") {
		return failure(name, ErrUnsupported, "is a %s; images can't be attached yet, only text documents (text, Markdown, code, CSV, JSON, HTML, PDF, DOCX, XLSX, EPUB, RTF)", typeName)
	}
	if hint, ok := convertHints[mime.String()]; ok {
		return failure(name, ErrUnsupported, "is a %s, which can't be attached; %s and attach that", typeName, hint)
	}
	return failure(name, ErrUnsupported, "is a %s, which can't be attached; attach a text document instead (text, Markdown, code, CSV, JSON, HTML, PDF, DOCX, XLSX, EPUB, RTF)", typeName)
}

// convertHints say how to turn an office format that can't be read into
// one that can.
var convertHints = map[string]string{
	"application/msword":                                                        "open it in Word or Pages, save it as .docx",
	"application/vnd.ms-excel":                                                  "open it in Excel or Numbers, save it as .xlsx",
	"application/vnd.oasis.opendocument.text":                                   "save it as .docx from LibreOffice or Pages",
	"application/vnd.oasis.opendocument.spreadsheet":                            "save it as .xlsx from LibreOffice or Numbers",
	"application/vnd.openxmlformats-officedocument.presentationml.presentation": "export it as PDF",
	"application/vnd.ms-powerpoint":                                             "export it as PDF",
	"application/vnd.apple.pages":                                               "export it as .docx or PDF",
}
