package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// hubSnapshot lays the tiny fixture out as the Hugging Face cache does
// (models--org--name/snapshots/<commit>/, each file a link to a blob) and
// returns the snapshot folder.
func hubSnapshot(t *testing.T, org, name string) string {
	t.Helper()
	fixture, err := filepath.Abs(filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit"))
	if err != nil {
		t.Fatal(err)
	}
	snap := filepath.Join(t.TempDir(), "hub", "models--"+org+"--"+name, "snapshots", "0123456789abcdef0123456789abcdef01234567")
	if err := os.MkdirAll(snap, 0o755); err != nil {
		t.Fatal(err)
	}
	files, _ := os.ReadDir(fixture)
	for _, f := range files {
		if err := os.Symlink(filepath.Join(fixture, f.Name()), filepath.Join(snap, f.Name())); err != nil {
			t.Fatal(err)
		}
	}
	return snap
}

// servedModels returns the ids /v1/models lists at base.
func servedModels(t *testing.T, base string) []string {
	t.Helper()
	res, err := http.Get(base + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(res.Body).Decode(&list); err != nil {
		t.Fatalf("/v1/models: %v", err)
	}
	var ids []string
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	return ids
}

// TestModelNameAgrees: `serve --no-ui`, `serve` and the app's Local API
// name a hub-cache snapshot alike in /v1/models, by its repository (not by
// its commit folder), and serve a request that names the model so.
func TestModelNameAgrees(t *testing.T) {
	const want = "tiny-org/tiny-model"
	snap := hubSnapshot(t, "tiny-org", "tiny-model")
	check := func(t *testing.T, base string) {
		t.Helper()
		if ids := servedModels(t, base); len(ids) != 1 || ids[0] != want {
			t.Fatalf("/v1/models lists %q; want the one model %q", ids, want)
		}
		res, err := http.Post(base+"/v1/chat/completions", "application/json",
			strings.NewReader(`{"model":"`+want+`","messages":[{"role":"user","content":"Hi"}],"max_tokens":2}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		var v struct {
			Model string `json:"model"`
		}
		if res.StatusCode != 200 || json.Unmarshal(body, &v) != nil || v.Model != want {
			t.Fatalf("a request naming %q: %d %s", want, res.StatusCode, body)
		}
	}
	for _, mode := range [][]string{{"--no-ui"}, nil} {
		t.Run("serve"+strings.Join(mode, ""), func(t *testing.T) {
			p := startServe(t, nil, append([]string{"--model", snap, "--backend", "cpu"}, mode...)...)
			check(t, "http://"+p.addr)
			p.cmd.Process.Signal(syscall.SIGTERM)
			<-p.done
		})
	}
	t.Run("app", func(t *testing.T) {
		_, state := startLocalAPIOn(t, "cpu", snap)
		check(t, state.URL)
	})
}
