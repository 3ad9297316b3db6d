package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// prefillCounts reads the statistics lines' prefilled and cached tokens
// and whether an image was encoded, one entry per answer.
func prefillCounts(t *testing.T, stderr string) (prefilled, cached []int, encoded []bool) {
	t.Helper()
	re := regexp.MustCompile(`\[prefill ([\d,]+) tokens?(?: \((\d+) more from the cache\))? at [^,·]*(, \d+ images? encoded)?`)
	for _, m := range re.FindAllStringSubmatch(stderr, -1) {
		p, _ := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
		c, _ := strconv.Atoi(m[2])
		prefilled, cached, encoded = append(prefilled, p), append(cached, c), append(encoded, m[3] != "")
	}
	return
}

// TestChatImage is `printf 'Q1\nQ2\n' | suzuran chat --image image0.png`
// on the tiny vision model: the image's size and cost are shown, the
// first prompt holds the image's 82 tokens (80 merged patches,
// <|vision_start|> and <|vision_end|>) more than the same chat without
// it, the tower runs once, and the second turn reuses the first prompt
// from the cache without encoding the image again. The demo model, which
// has no image processor or vision tower, refuses --image.
func TestChatImage(t *testing.T) {
	model := filepath.Join(vlFixture, "hf-bf16")
	img := filepath.Join(vlFixture, "images", "image0.png")
	const stdin = "What is in the picture?\nAnd its colour?\n"
	_, plain := runChatProcess(t, stdin, "--model", model, "--temperature", "0", "--think", "off", "--max-tokens", "4")
	stdout, withImage := runChatProcess(t, stdin, "--model", model, "--temperature", "0", "--think", "off", "--max-tokens", "4", "--image", img)
	if !strings.Contains(withImage, img+": 320 × 240, seen at 320 × 256, 80 tokens") {
		t.Errorf("stderr does not give the image's size and cost:\n%s", withImage)
	}
	if strings.Count(stdout, "\n\n") != 2 {
		t.Errorf("want two answers:\n%q", stdout)
	}
	p0, c0, e0 := prefillCounts(t, plain)
	p1, c1, e1 := prefillCounts(t, withImage)
	if len(p0) != 2 || len(p1) != 2 {
		t.Fatalf("want two statistics lines each:\n%s\n%s", plain, withImage)
	}
	if p1[0]-p0[0] != 82 {
		t.Errorf("the first prompt holds %d tokens with the image, %d without: want 82 more", p1[0], p0[0])
	}
	if e0[0] || e0[1] || !e1[0] || e1[1] {
		t.Errorf("images encoded: %v without --image, %v with (want the first turn only)", e0, e1)
	}
	if c1[1]-c0[1] != 82 {
		t.Errorf("the second turn takes %d tokens from the cache with the image, %d without: want 82 more", c1[1], c0[1])
	}

	home := t.TempDir()
	cmd := exec.Command(os.Args[0], "chat", "--image", img)
	cmd.Env = append(os.Environ(), suzuranMainEnv+"=1", "HOME="+home,
		"XDG_CONFIG_HOME="+filepath.Join(home, "config"), "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "XDG_STATE_HOME="+filepath.Join(home, "state"))
	cmd.Stdin = strings.NewReader("Hello\n")
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	if err := cmd.Run(); err == nil || !strings.Contains(errOut.String(), "reads no images") {
		t.Errorf("the demo model with --image: %v\n%s\nwant an error saying it reads no images", err, errOut.String())
	}
}
