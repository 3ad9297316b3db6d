package main

import (
	"bytes"
	"encoding/json"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/imageproc"
)

func runExtract(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetIn(strings.NewReader(""))
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"extract"}, args...))
	err := root.Execute()
	return out.String(), errOut.String(), err
}

// suzuran extract lists images with their size and token cost, counted by
// the model's preprocessor_config.json (the demo model has none: Qwen3.6's
// is used, and said), with --max-pixels the largest image the model sees;
// a file that cannot be read is reported and the others still listed.
func TestExtractImages(t *testing.T) {
	demo := filepath.Join("..", "assets", "models", "suzuran-tiny")
	fixture := filepath.Join("..", "engine", "imageproc", "testdata")
	dir := t.TempDir()
	big := image.NewNRGBA(image.Rect(0, 0, 640, 480))
	for i := range big.Pix {
		big.Pix[i] = uint8(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, big); err != nil {
		t.Fatal(err)
	}
	bigPath := filepath.Join(dir, "big.png")
	if err := os.WriteFile(bigPath, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.png")
	if err := os.WriteFile(broken, b.Bytes()[:100], 0o644); err != nil {
		t.Fatal(err)
	}

	stdout, stderr, err := runExtract(t, "--model", demo, filepath.Join(fixture, "image0.png"), filepath.Join(fixture, "image1.png"), broken)
	if err == nil || !strings.Contains(err.Error(), "1 of 3 files") {
		t.Errorf("error %v, want one of three files unread", err)
	}
	if stdout != "" {
		t.Errorf("images printed a document block: %q", stdout)
	}
	for _, want := range []string{
		"reads no images (no preprocessor_config.json); tokens are counted as Qwen3.6 would see them",
		"image0.png: PNG image, 2.73 KB, 320 × 240 pixels, seen at 320 × 256, 80 tokens",
		"image1.png: PNG image, 3.23 KB, 150 × 500 pixels, seen at 160 × 512, 80 tokens",
		"broken.png: the PNG file is cut short",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}

	// A model with a preprocessor_config.json, --max-pixels, --json.
	model := t.TempDir()
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		data, err := os.ReadFile(filepath.Join(demo, name))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(model, name), data, 0o644)
	}
	cfgJSON, err := os.ReadFile(filepath.Join(fixture, "preprocessor_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(model, "preprocessor_config.json"), bytes.Replace(cfgJSON, []byte("65536"), []byte("1024"), 1), 0o644)
	stdout, stderr, err = runExtract(t, "--json", "--model", model, "--max-pixels", "65536", bigPath, filepath.Join(fixture, "image2.png"))
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	var got extractOutput
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	cfg := imageproc.Qwen36Config()
	cfg.MinPixels = 1024
	cfg = cfg.WithMaxPixels(65536)
	wantBig, _ := cfg.TokenCost(640, 480)
	if len(got.Images) != 2 || got.Images[0].Tokens != wantBig || got.Images[0].Width != 640 || got.Images[0].ResizedWidth*got.Images[0].ResizedHeight > 65536 {
		t.Errorf("images %+v, want big.png at %d tokens", got.Images, wantBig)
	}
	// image2.png (64 × 64) is no longer scaled up to 65,536 pixels with
	// this model's minimum of 1,024: 64 × 64, 4 tokens.
	if len(got.Images) == 2 && (got.Images[1].Tokens != 4 || got.Images[1].SHA256 == "") {
		t.Errorf("image2.png: %+v", got.Images[1])
	}
	if strings.Contains(stderr, "reads no images") {
		t.Errorf("the model's own processor was not used: %s", stderr)
	}
}
