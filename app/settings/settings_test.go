package settings

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestUpdate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		before  string // "" for no file
		want    map[string]any
		wantErr string
	}{
		{"creates the file", "", map[string]any{"model": "/m/Qwen"}, ""},
		{"keeps other keys", `{"api": {"enabled": true, "port": 8080}, "model": "/old", "theme": "dark"}`,
			map[string]any{"api": map[string]any{"enabled": true, "port": 8080.0}, "model": "/m/Qwen", "theme": "dark"}, ""},
		{"refuses a broken file and leaves it", `{"api": `, nil, "not a JSON object"},
		{"refuses a JSON array and leaves it", `[1,2]`, nil, "not a JSON object"},
		{"refuses null and leaves it", `null`, nil, "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "suzuran", "settings.json")
			if tc.before != "" {
				os.MkdirAll(filepath.Dir(path), 0o755)
				os.WriteFile(path, []byte(tc.before), 0o600)
			}
			err := SetModel(path, "/m/Qwen")
			data, _ := os.ReadFile(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming the file and saying %q", err, tc.wantErr)
				}
				if string(data) != tc.before {
					t.Errorf("the file changed to %q", data)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(data, &got); err != nil {
				t.Fatalf("written file %q: %v", data, err)
			}
			if g, w := mustJSON(got), mustJSON(tc.want); g != w {
				t.Errorf("file = %s, want %s", g, w)
			}
			entries, _ := os.ReadDir(filepath.Dir(path))
			if len(entries) != 1 {
				t.Errorf("the folder holds %d entries after the write, want settings.json alone", len(entries))
			}
		})
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// A new file may come to hold the API's key: it is the user's alone. A
// file that exists keeps its permissions, wider or narrower.
func TestUpdatePermissions(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "new", "settings.json")
	if err := SetModel(fresh, "/m"); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(fresh); st.Mode().Perm() != 0o600 {
		t.Errorf("a new settings file is %v, want 0600", st.Mode().Perm())
	}
	for _, perm := range []os.FileMode{0o644, 0o600, 0o640} {
		path := filepath.Join(dir, "settings.json")
		os.WriteFile(path, []byte(`{}`), perm)
		os.Chmod(path, perm)
		if err := Update(path, map[string]json.RawMessage{"theme": json.RawMessage(`"dark"`)}); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(path); st.Mode().Perm() != perm {
			t.Errorf("a %v file became %v", perm, st.Mode().Perm())
		}
	}
}

func TestModel(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, file, want, wantErr string
	}{
		{"absent file", "", "", ""},
		{"no model key", `{"theme": "dark"}`, "", ""},
		{"a model", `{"model": "/m/Qwen", "other": 1}`, "/m/Qwen", ""},
		{"a model that is not a string", `{"model": 3}`, "", `"model" is not a string`},
		{"not JSON", `not json`, "", "not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".json")
			if tc.file != "" {
				os.WriteFile(path, []byte(tc.file), 0o600)
			}
			got, err := Model(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("err = %v, want one naming the file and saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Model = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}
