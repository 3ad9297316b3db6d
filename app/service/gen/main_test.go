package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGeneratedFileIsCurrent fails when the committed TypeScript differs
// from what the Go types say now.
func TestGeneratedFileIsCurrent(t *testing.T) {
	root := filepath.Join("..", "..", "..")
	want, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, Output))
	if err != nil {
		t.Fatalf("%v: run `go run ./app/service/gen` from the repository root", err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s is out of date with app/service: run `go run ./app/service/gen` from the repository root", Output)
	}
	for _, s := range []string{"export interface UI {", "Send(req: SendRequest): Promise<SendResult>;",
		"stats?: Stats;", "export interface Event {", `Reply: "reply",`} {
		if !strings.Contains(string(want), s) {
			t.Errorf("generated file lacks %q", s)
		}
	}
}
