package server

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/imageproc"
)

// visionDir is the tiny vision model (engine/internal/fixtures' README).
var visionDir = filepath.Join("..", "..", "engine", "internal", "fixtures", "testdata", "qwen35moe-vl-tiny", "hf-bf16")

func readVisionImage(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(visionDir, "..", "images", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// bombPNG is a PNG whose header declares w × h pixels and holds no data.
func bombPNG(w, h uint32) []byte {
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 13)
	binary.BigEndian.PutUint32(ihdr, w)
	binary.BigEndian.PutUint32(ihdr[4:], h)
	ihdr[8], ihdr[9] = 8, 2
	binary.Write(&b, binary.BigEndian, uint32(13))
	chunk := append([]byte("IHDR"), ihdr...)
	b.Write(chunk)
	binary.Write(&b, binary.BigEndian, crc32.ChecksumIEEE(chunk))
	return b.Bytes()
}

// TestImagesThroughAPI: an image sent in each API's shape (chat image_url
// data URL, Responses input_image, Anthropic base64 image block) reaches
// the tiny vision model: the prompt holds exactly the image's tokens more
// than the text alone (its merged patches and <|vision_start|>,
// <|vision_end|>), count_tokens counts them, detail maps to the size
// limit, and the answer's logprobs change with the image (its pixels reach
// the tower). An http(s) URL, a bomb's header and the demo model (no
// vision tower) are 400s naming the part.
func TestImagesThroughAPI(t *testing.T) {
	ts := startServer(t, loadModel(t, visionDir, engine.LoadOptions{ContextTokens: 4096}), nil)
	cfg, err := imageproc.LoadConfig(visionDir)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	dataURL := func(data []byte) string { return "data:image/png;base64," + b64(data) }
	img0, img1 := readVisionImage(t, "image0.png"), readVisionImage(t, "image1.png")
	cost := func(data []byte, maxPixels int) float64 {
		info, err := imageproc.Probe(data)
		if err != nil {
			t.Fatal(err)
		}
		n, err := cfg.WithMaxPixels(maxPixels).TokenCost(info.Width, info.Height)
		if err != nil {
			t.Fatal(err)
		}
		return float64(n + 2) // <|vision_start|> and <|vision_end|>
	}
	number := func(res response, keys ...any) float64 {
		t.Helper()
		if res.status != 200 {
			t.Fatalf("status %d: %s", res.status, res.body)
		}
		n, ok := path(res.json(t), keys...).(float64)
		if !ok {
			t.Fatalf("no %v in %s", keys, res.body)
		}
		return n
	}
	const question = "What is in the picture?"
	chatBody := func(parts ...any) map[string]any {
		return map[string]any{"max_tokens": 1, "temperature": 0, "logprobs": true,
			"messages": []map[string]any{{"role": "user", "content": append(parts, map[string]any{"type": "text", "text": question})}}}
	}
	imageURL := func(data []byte, detail string) map[string]any {
		iu := map[string]any{"url": dataURL(data)}
		if detail != "" {
			iu["detail"] = detail
		}
		return map[string]any{"type": "image_url", "image_url": iu}
	}

	t.Run("chat completions image_url", func(t *testing.T) {
		text := post(t, ts.url+"/v1/chat/completions", chatBody())
		base := number(text, "usage", "prompt_tokens")
		with0 := post(t, ts.url+"/v1/chat/completions", chatBody(imageURL(img0, "")))
		if got, want := number(with0, "usage", "prompt_tokens")-base, cost(img0, imageproc.DefaultMaxPixels); got != want {
			t.Errorf("image0 adds %v prompt tokens, want %v", got, want)
		}
		if want := 80 + 2.0; cost(img0, imageproc.DefaultMaxPixels) != want {
			t.Errorf("image0 costs %v tokens, the reference's prompt holds %v", cost(img0, imageproc.DefaultMaxPixels), want)
		}
		with1 := post(t, ts.url+"/v1/chat/completions", chatBody(imageURL(img1, "")))
		two := post(t, ts.url+"/v1/chat/completions", chatBody(imageURL(img0, ""), imageURL(img1, "")))
		if got, want := number(two, "usage", "prompt_tokens")-base, cost(img0, 0)+cost(img1, 0); got != want {
			t.Errorf("two images add %v prompt tokens, want %v", got, want)
		}
		lp := func(r response) float64 { return number(r, "choices", 0, "logprobs", "content", 0, "logprob") }
		again := post(t, ts.url+"/v1/chat/completions", chatBody(imageURL(img0, "")))
		if lp(with0) != lp(again) {
			t.Errorf("the same image gives logprobs %v and %v", lp(with0), lp(again))
		}
		if lp(with0) == lp(with1) && path(with0.json(t), "choices", 0, "message", "content") == path(with1.json(t), "choices", 0, "message", "content") {
			t.Errorf("image0 and image1 give the same answer and logprob %v: the pixels do not reach the model", lp(with0))
		}
	})

	t.Run("detail", func(t *testing.T) {
		// 800 × 600: 475 tokens at auto and high, 234 at low.
		m := image.NewRGBA(image.Rect(0, 0, 800, 600))
		for y := range 600 {
			for x := range 800 {
				m.Set(x, y, color.RGBA{uint8(x), uint8(y), uint8(x ^ y), 255})
			}
		}
		var buf bytes.Buffer
		if err := png.Encode(&buf, m); err != nil {
			t.Fatal(err)
		}
		base := number(post(t, ts.url+"/v1/chat/completions", chatBody()), "usage", "prompt_tokens")
		got := map[string]float64{}
		for detail, pixels := range map[string]int{"low": lowDetailPixels, "auto": imageproc.DefaultMaxPixels, "high": highDetailPixels} {
			got[detail] = number(post(t, ts.url+"/v1/chat/completions", chatBody(imageURL(buf.Bytes(), detail))), "usage", "prompt_tokens") - base
			if want := cost(buf.Bytes(), pixels); got[detail] != want {
				t.Errorf("detail %s: %v tokens, want %v", detail, got[detail], want)
			}
		}
		if !(got["low"] < got["auto"]) {
			t.Errorf("detail low takes %v tokens, auto %v", got["low"], got["auto"])
		}
		// An image large enough for high to differ from auto costs tens of
		// seconds of the tower on this CPU; the part's limit is read here.
		for detail, want := range map[string]int{"low": lowDetailPixels, "auto": imageproc.DefaultMaxPixels, "": imageproc.DefaultMaxPixels, "high": highDetailPixels} {
			obj := chat.NewObject()
			iu := chat.NewObject()
			iu.Set("url", dataURL(img0))
			iu.Set("detail", detail)
			obj.Set("type", "image_url")
			obj.Set("image_url", iu)
			p, err := decodeImagePart(obj, "p")
			if err != nil || p.maxPixels != want {
				t.Errorf("detail %q: %d pixels (%v), want %d", detail, p.maxPixels, err, want)
			}
		}
	})

	t.Run("responses input_image", func(t *testing.T) {
		ask := func(content ...any) float64 {
			return number(post(t, ts.url+"/v1/responses", map[string]any{"max_output_tokens": 16, "temperature": 0,
				"input": []any{map[string]any{"role": "user", "content": append(content, map[string]any{"type": "input_text", "text": question})}}}),
				"usage", "input_tokens")
		}
		if got, want := ask(map[string]any{"type": "input_image", "image_url": dataURL(img1), "detail": "auto"})-ask(), cost(img1, 0); got != want {
			t.Errorf("input_image adds %v input tokens, want %v", got, want)
		}
	})

	t.Run("anthropic image block", func(t *testing.T) {
		block := map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64(img0)}}
		count := func(content ...any) float64 {
			return number(post(t, ts.url+"/v1/messages/count_tokens", map[string]any{
				"messages": []map[string]any{{"role": "user", "content": append(content, map[string]any{"type": "text", "text": question})}}}), "input_tokens")
		}
		with := count(block)
		if got, want := with-count(), cost(img0, 0); got != want {
			t.Errorf("count_tokens: the image block adds %v, want %v", got, want)
		}
		res := post(t, ts.url+"/v1/messages", map[string]any{"max_tokens": 4, "temperature": 0,
			"messages": []map[string]any{{"role": "user", "content": []any{block, map[string]any{"type": "text", "text": question}}}}})
		if in := number(res, "usage", "input_tokens") + number(res, "usage", "cache_read_input_tokens"); in != with {
			t.Errorf("messages counts %v input tokens, count_tokens %v", in, with)
		}
	})

	demo := startServer(t, loadModel(t, demoDir, engine.LoadOptions{}), nil)
	bomb := bombPNG(30000, 30000)
	refusals := []struct {
		name, url, param, says string
		body                   map[string]any
	}{
		{"chat http url", ts.url + "/v1/chat/completions", "messages[0].content[0].image_url.url", "fetches nothing",
			chatBody(map[string]any{"type": "image_url", "image_url": map[string]any{"url": "https://example.com/cat.png"}})},
		{"chat bad detail", ts.url + "/v1/chat/completions", "messages[0].content[0].image_url.detail", "low, high or auto",
			chatBody(map[string]any{"type": "image_url", "image_url": map[string]any{"url": dataURL(img0), "detail": "ultra"}})},
		{"chat bomb", ts.url + "/v1/chat/completions", "messages[0].content[0].image_url.url", "too large", chatBody(imageURL(bomb, ""))},
		{"chat not an image", ts.url + "/v1/chat/completions", "messages[0].content[0].image_url.url", "could not be read", chatBody(imageURL([]byte("hello"), ""))},
		{"responses http url", ts.url + "/v1/responses", "input[0].content[0].image_url", "fetches nothing", map[string]any{"input": []any{map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "input_image", "image_url": "http://example.com/cat.png"}}}}}},
		{"anthropic url source", ts.url + "/v1/messages/count_tokens", "messages.0.content.0.source.url", "fetches nothing", map[string]any{"messages": []any{map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "image", "source": map[string]any{"type": "url", "url": "https://example.com/cat.png"}}}}}}},
		{"demo model, chat", demo.url + "/v1/chat/completions", "messages[0].content[0].image_url.url", "does not read images", chatBody(imageURL(img0, ""))},
		{"demo model, count_tokens", demo.url + "/v1/messages/count_tokens", "messages.0.content.0.source", "does not read images", map[string]any{"messages": []any{map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "image", "source": map[string]any{"type": "base64", "media_type": "image/png", "data": b64(img0)}}}}}}},
	}
	for _, c := range refusals {
		res := post(t, c.url, c.body)
		if res.status != 400 {
			t.Errorf("%s: %d %s, want 400", c.name, res.status, res.body)
			continue
		}
		v := res.json(t)
		if param := path(v, "error", "param"); param != nil && param != c.param {
			t.Errorf("%s: param %v, want %s", c.name, param, c.param)
		}
		if msg, _ := path(v, "error", "message").(string); !strings.Contains(msg, c.says) || !strings.Contains(msg, c.param) {
			t.Errorf("%s: %q should name %s and say %q", c.name, msg, c.param, c.says)
		}
	}
}
