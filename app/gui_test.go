package main

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// frontend/src/lib/backend.ts types the methods Wails binds from App by
// hand (there is no Wails CLI to generate them); this keeps the two lists
// the same, so a method added on one side fails here and not in the window.
func TestBackendTypesMatchBoundMethods(t *testing.T) {
	var bound []string
	appType := reflect.TypeOf(&App{})
	for i := range appType.NumMethod() {
		bound = append(bound, appType.Method(i).Name)
	}

	src, err := os.ReadFile("../frontend/src/lib/backend.ts")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)export interface AppBinding \{(.*?)\n\}`).FindSubmatch(src)
	if block == nil {
		t.Fatal("backend.ts has no `export interface AppBinding { … }`")
	}
	var typed []string
	for _, m := range regexp.MustCompile(`(?m)^\s*(\w+)\(`).FindAllSubmatch(block[1], -1) {
		typed = append(typed, string(m[1]))
	}
	slices.Sort(bound)
	slices.Sort(typed)
	if !slices.Equal(bound, typed) {
		t.Errorf("App binds %s; backend.ts's AppBinding types %s", strings.Join(bound, ", "), strings.Join(typed, ", "))
	}
	if len(bound) == 0 {
		t.Error("App binds no methods")
	}
}

func TestAppVersion(t *testing.T) {
	if got := (&App{}).Version(); got != version {
		t.Errorf("App.Version() = %q, want %q", got, version)
	}
}
