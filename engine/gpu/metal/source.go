package metal

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Unit is one MSL translation unit as Metal compiles it: a .metal file with
// the project headers it includes written in place.
type Unit struct {
	Name string // the .metal file
	Text string
}

var (
	includeLine = regexp.MustCompile(`^\s*#\s*include\s*"([^"]+)"`)
	pragmaOnce  = regexp.MustCompile(`^\s*#\s*pragma\s+once\b`)
)

// TranslationUnits turns the kernel sources (file name → text, the .metal
// files and the headers they include) into one unit per .metal file, sorted
// by name. pathPrefix is put before the file names in #line directives, so
// that the compiler's messages name the files as the repository does
// ("metalkernels/gemv.metal:12:3: error: ...").
//
// newLibraryWithSource compiles a single string and has no include path, so
// `#include "common.h"` is resolved here: each project header is written in
// place at its first inclusion in a unit and skipped afterwards (the effect
// of its #pragma once). #line directives keep the compiler's messages
// pointing at the original file and line. Each .metal file is its own unit,
// as it is in the emulator, so files may reuse names for their own helper
// structs and macros.
func TranslationUnits(sources map[string]string, pathPrefix string) ([]Unit, error) {
	var names []string
	for name := range sources {
		if strings.HasSuffix(name, ".metal") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, fmt.Errorf("metal: no .metal files among the %d kernel sources", len(sources))
	}
	units := make([]Unit, 0, len(names))
	for _, name := range names {
		var b strings.Builder
		included := map[string]bool{}
		if err := expand(&b, sources, pathPrefix, name, included); err != nil {
			return nil, err
		}
		units = append(units, Unit{Name: name, Text: b.String()})
	}
	return units, nil
}

// expand writes file into b with its project includes expanded. A header
// is marked included before it is expanded, so headers that include each
// other end as they would with #pragma once instead of recursing.
func expand(b *strings.Builder, sources map[string]string, prefix, file string, included map[string]bool) error {
	text := sources[file]
	fmt.Fprintf(b, "#line 1 %q\n", prefix+file)
	lines := strings.Split(text, "\n")
	for i, line := range lines {
		if pragmaOnce.MatchString(line) {
			b.WriteString("\n") // keeps the line numbers
			continue
		}
		m := includeLine.FindStringSubmatch(line)
		if m == nil {
			b.WriteString(line)
			if i < len(lines)-1 {
				b.WriteString("\n")
			}
			continue
		}
		header := m[1]
		if _, ok := sources[header]; !ok {
			return fmt.Errorf("metal: %s:%d: #include %q: no such file among the kernel sources", file, i+1, header)
		}
		if !included[header] {
			included[header] = true
			if err := expand(b, sources, prefix, header, included); err != nil {
				return err
			}
			b.WriteString("\n")
		}
		// Back in this file: the next line is line i+2.
		fmt.Fprintf(b, "#line %d %q\n", i+2, prefix+file)
	}
	return nil
}
