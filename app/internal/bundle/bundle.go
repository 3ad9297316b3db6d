// Package bundle makes Suzuran.app, the macOS app bundle: the built binary,
// Info.plist rendered from the repository's Info.plist.tmpl with the values
// in wails.json, and the icon as .icns.
//
// Nothing here needs macOS, so the bundle's layout and its Info.plist are
// tested on any machine; `make app` runs it on a Mac through the mkapp
// command beside this package.
package bundle

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/template"
)

// Meta is what Info.plist says about the app.
type Meta struct {
	Name       string // CFBundleName: wails.json info.productName
	BundleID   string // CFBundleIdentifier: info.bundleIdentifier
	Version    string // CFBundleShortVersionString and CFBundleVersion: info.productVersion
	Copyright  string // NSHumanReadableCopyright: info.copyright
	Executable string // CFBundleExecutable, the binary in Contents/MacOS: outputfilename
	IconFile   string // CFBundleIconFile, in Contents/Resources
}

// iconFile is the bundle's icon, Contents/Resources/appicon.icns.
const iconFile = "appicon.icns"

// LoadMeta reads the bundle's values from a wails.json file.
func LoadMeta(wailsJSON string) (Meta, error) {
	data, err := os.ReadFile(wailsJSON)
	if err != nil {
		return Meta{}, err
	}
	var project struct {
		OutputFilename string `json:"outputfilename"`
		Info           struct {
			ProductName      string `json:"productName"`
			ProductVersion   string `json:"productVersion"`
			BundleIdentifier string `json:"bundleIdentifier"`
			Copyright        string `json:"copyright"`
		} `json:"info"`
	}
	if err := json.Unmarshal(data, &project); err != nil {
		return Meta{}, fmt.Errorf("%s: %w", wailsJSON, err)
	}
	m := Meta{
		Name:       project.Info.ProductName,
		BundleID:   project.Info.BundleIdentifier,
		Version:    project.Info.ProductVersion,
		Copyright:  project.Info.Copyright,
		Executable: project.OutputFilename,
		IconFile:   iconFile,
	}
	for _, field := range []struct{ name, value, example string }{
		{"info.productName", m.Name, "Suzuran"},
		{"info.bundleIdentifier", m.BundleID, "app.suzuran.Suzuran"},
		{"info.productVersion", m.Version, "0.1.0"},
		{"info.copyright", m.Copyright, "Copyright © 2026 Suzuran authors"},
		{"outputfilename", m.Executable, "suzuran"},
	} {
		if strings.TrimSpace(field.value) == "" {
			return Meta{}, fmt.Errorf("%s: %s is missing or empty: set it (for example %q)", wailsJSON, field.name, field.example)
		}
	}
	if strings.ContainsAny(m.Executable, `/\`) {
		return Meta{}, fmt.Errorf("%s: outputfilename %q must be a file name, not a path", wailsJSON, m.Executable)
	}
	return m, nil
}

// RenderInfoPlist fills the Info.plist template with m and checks that the
// result is a well-formed property list. The template escapes values with
// its xml function.
func RenderInfoPlist(tmpl string, m Meta) ([]byte, error) {
	t, err := template.New("Info.plist.tmpl").
		Option("missingkey=error").
		Funcs(template.FuncMap{"xml": xmlEscape}).
		Parse(tmpl)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	if err := t.Execute(&out, m); err != nil {
		return nil, err
	}
	if _, err := ParsePlist(out.Bytes()); err != nil {
		return nil, fmt.Errorf("the rendered Info.plist is not a valid property list: %w", err)
	}
	return out.Bytes(), nil
}

func xmlEscape(s string) (string, error) {
	var b strings.Builder
	if err := xml.EscapeText(&b, []byte(s)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// ParsePlist reads an XML property list whose root is a dict, as Info.plist
// is. Values are string, bool, or []any for arrays; integers, reals and
// dates are kept as their text.
func ParsePlist(data []byte) (map[string]any, error) {
	dec := xml.NewDecoder(bytes.NewReader(data))
	dec.Strict = true
	var root map[string]any
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		start, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		switch start.Name.Local {
		case "plist":
			continue
		case "dict":
			if root != nil {
				return nil, errors.New("more than one root dict")
			}
			if root, err = parseDict(dec); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("unexpected <%s> at the top level", start.Name.Local)
		}
	}
	if root == nil {
		return nil, errors.New("no <dict> in the property list")
	}
	return root, nil
}

func parseDict(dec *xml.Decoder) (map[string]any, error) {
	dict := map[string]any{}
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.EndElement:
			return dict, nil
		case xml.StartElement:
			if tok.Name.Local != "key" {
				return nil, fmt.Errorf("<%s> where a <key> belongs", tok.Name.Local)
			}
			var key string
			if err := dec.DecodeElement(&key, &tok); err != nil {
				return nil, err
			}
			if _, dup := dict[key]; dup {
				return nil, fmt.Errorf("key %s appears twice", key)
			}
			value, err := parseValue(dec)
			if err != nil {
				return nil, fmt.Errorf("key %s: %w", key, err)
			}
			dict[key] = value
		}
	}
}

// errEndOfContainer is parseValue's answer at the end of an array (or,
// in a dict, where a value is missing).
var errEndOfContainer = errors.New("no value before the closing tag")

// parseValue reads the next value element.
func parseValue(dec *xml.Decoder) (any, error) {
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		switch tok := tok.(type) {
		case xml.EndElement:
			return nil, errEndOfContainer
		case xml.StartElement:
			switch tok.Name.Local {
			case "true", "false":
				if err := dec.Skip(); err != nil {
					return nil, err
				}
				return tok.Name.Local == "true", nil
			case "string", "integer", "real", "date", "data":
				var s string
				if err := dec.DecodeElement(&s, &tok); err != nil {
					return nil, err
				}
				return s, nil
			case "dict":
				return parseDict(dec)
			case "array":
				var items []any
				for {
					item, err := parseValue(dec)
					if errors.Is(err, errEndOfContainer) {
						return items, nil
					}
					if err != nil {
						return nil, err
					}
					items = append(items, item)
				}
			default:
				return nil, fmt.Errorf("unknown value type <%s>", tok.Name.Local)
			}
		}
	}
}

// Options says what goes into a bundle.
type Options struct {
	Binary   string // the built macOS binary
	Template string // text of Info.plist.tmpl
	Meta     Meta
	IconPNG  []byte // the 1024×1024 app icon
	Out      string // the bundle to create, such as bin/Suzuran.app; replaced if present
}

// Assemble writes the bundle:
//
//	Out/Contents/Info.plist
//	Out/Contents/PkgInfo
//	Out/Contents/MacOS/<Meta.Executable>
//	Out/Contents/Resources/appicon.icns
func Assemble(o Options) error {
	if !strings.HasSuffix(o.Out, ".app") {
		return fmt.Errorf("bundle path %s must end in .app", o.Out)
	}
	plist, err := RenderInfoPlist(o.Template, o.Meta)
	if err != nil {
		return err
	}
	icns, err := ICNS(o.IconPNG)
	if err != nil {
		return err
	}
	binary, err := os.ReadFile(o.Binary)
	if err != nil {
		return fmt.Errorf("reading the app binary: %w (build it first: make build)", err)
	}
	if err := os.RemoveAll(o.Out); err != nil {
		return err
	}
	contents := filepath.Join(o.Out, "Contents")
	for _, dir := range []string{"MacOS", "Resources"} {
		if err := os.MkdirAll(filepath.Join(contents, dir), 0o755); err != nil {
			return err
		}
	}
	files := []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{filepath.Join(contents, "Info.plist"), plist, 0o644},
		// PkgInfo predates Info.plist; Finder still reads it.
		{filepath.Join(contents, "PkgInfo"), []byte("APPL????"), 0o644},
		{filepath.Join(contents, "MacOS", o.Meta.Executable), binary, 0o755},
		{filepath.Join(contents, "Resources", o.Meta.IconFile), icns, 0o644},
	}
	for _, f := range files {
		if err := os.WriteFile(f.path, f.data, f.mode); err != nil {
			return err
		}
	}
	return nil
}
