package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// visionCase is a prompt of the qwen35moe-vl-tiny fixture (see
// testdata/README.md): transformers' prompt_ids, text ids around
// <|vision_start|>, one <|image_pad|> per merged patch, <|vision_end|>.
type visionCase struct {
	Name      string   `json:"name"`
	Images    []string `json:"images"`
	PromptIDs []int    `json:"prompt_ids"`
}

func loadVisionCases(t *testing.T) (map[string]int, []visionCase) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "vision-prompts.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Images map[string]struct {
			Grid [3]int `json:"grid_thw"`
		} `json:"images"`
		Cases []visionCase `json:"cases"`
	}
	if err := json.Unmarshal(data, &f); err != nil {
		t.Fatal(err)
	}
	tokens := map[string]int{}
	for name, im := range f.Images {
		tokens[name] = im.Grid[0] * im.Grid[1] * im.Grid[2] / 4 // merge 2 × 2
	}
	return tokens, f.Cases
}

// TestImagePartsMatchReferenceIDs renders each fixture prompt as a user
// message, its text parts the fixture's text (decoded from its ids) and an
// ImagePart per image with the image's merged token count, through the
// checkpoint's template: the ids between the turn's header and its end
// must be transformers' prompt_ids, the image runs exactly. The fixture's
// text ids are random draws, and a few of them (1 to 3 a prompt) are not
// how the tokenizer encodes their own text (141 decodes to text that
// encodes as 171 123 121): those text runs are compared with the
// tokenizer's encoding of the decoded text, and the count is logged.
func TestImagePartsMatchReferenceIDs(t *testing.T) {
	tmpl, tok := tinyModel(t)
	tokens, cases := loadVisionCases(t)
	start, _ := tok.TokenID("<|vision_start|>")
	end, _ := tok.TokenID("<|vision_end|>")
	pad, _ := tok.TokenID(ImagePadToken)
	for _, c := range cases {
		if len(c.Images) == 0 {
			continue
		}
		var parts []any
		var want []ImagePart
		var wantIDs []int
		nonCanonical := 0
		addText := func(ids []int) {
			s := tok.Decode(ids)
			parts = append(parts, textPart(s))
			canon := tok.Encode(s)
			if !slices.Equal(canon, ids) {
				nonCanonical++
			}
			wantIDs = append(wantIDs, canon...)
		}
		text, k := []int{}, 0
		for i := 0; i < len(c.PromptIDs); i++ {
			if c.PromptIDs[i] != start {
				text = append(text, c.PromptIDs[i])
				continue
			}
			j := i + 1
			for j < len(c.PromptIDs) && c.PromptIDs[j] == pad {
				j++
			}
			if j >= len(c.PromptIDs) || c.PromptIDs[j] != end || j-i-1 != tokens[c.Images[k]] {
				t.Fatalf("%s: image %d: %d pads, the fixture's grid gives %d", c.Name, k, j-i-1, tokens[c.Images[k]])
			}
			addText(text)
			wantIDs = append(wantIDs, c.PromptIDs[i:j+1]...)
			img := ImagePart{Index: k, Tokens: tokens[c.Images[k]]}
			parts, want = append(parts, img), append(want, img)
			text, k, i = nil, k+1, j
		}
		addText(text)
		req := RenderRequest{Messages: []Message{{Role: "user", Content: parts}}}
		p, err := tmpl.Encode(tok, req)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		head := tok.EncodeWithSpecials("<|im_start|>user\n")
		tail := tok.EncodeWithSpecials("<|im_end|>\n")
		got := p.IDs
		if !slices.Equal(got[:len(head)], head) || !slices.Equal(got[len(got)-len(tail):], tail) {
			t.Fatalf("%s: not one user turn: %q", c.Name, p.Text[:min(60, len(p.Text))])
		}
		got = got[len(head) : len(got)-len(tail)]
		if !slices.Equal(got, wantIDs) {
			t.Errorf("%s: ids differ from transformers'\n got  %v\n want %v", c.Name, got, wantIDs)
		}
		t.Logf("%s: %d ids, %d images; %d of its text runs re-encoded differently", c.Name, len(got), len(want), nonCanonical)
		if !slices.Equal(p.Images, want) || req.ImageTokens() != strings.Count(p.Text, ImagePadToken) {
			t.Errorf("%s: images %v (want %v), ImageTokens %d for %d pads", c.Name, p.Images, want, req.ImageTokens(), strings.Count(p.Text, ImagePadToken))
		}
	}
}

func textPart(s string) *Object {
	o := NewObject()
	o.Set("type", "text")
	o.Set("text", s)
	return o
}

// Several images in a message and across turns: each run has its own
// count, in the order of the conversation.
func TestImagePartsAcrossTurns(t *testing.T) {
	tmpl, tok := tinyModel(t)
	req := RenderRequest{Messages: []Message{
		{Role: "user", Content: []any{textPart("Compare "), ImagePart{Index: 0, Tokens: 3}, textPart(" and "), &ImagePart{Index: 1, Tokens: 2}}},
		{Role: "assistant", Content: "They differ."},
		{Role: "user", Content: []any{ImagePart{Index: 2, Tokens: 4}, textPart("And this one?")}},
	}, AddGenerationPrompt: true}
	p, err := tmpl.Encode(tok, req)
	if err != nil {
		t.Fatal(err)
	}
	run := func(n int) string {
		return "<|vision_start|>" + strings.Repeat(ImagePadToken, n) + "<|vision_end|>"
	}
	want := "<|im_start|>user\nCompare " + run(3) + " and " + run(2) + "<|im_end|>\n" +
		"<|im_start|>assistant\nThey differ.<|im_end|>\n" +
		"<|im_start|>user\n" + run(4) + "And this one?<|im_end|>\n<|im_start|>assistant\n<think>\n"
	if p.Text != want {
		t.Errorf("got  %q\nwant %q", p.Text, want)
	}
	pad, _ := tok.TokenID(ImagePadToken)
	var runs []int
	for i := 0; i < len(p.IDs); i++ {
		if p.IDs[i] == pad && (i == 0 || p.IDs[i-1] != pad) {
			runs = append(runs, 0)
		}
		if p.IDs[i] == pad {
			runs[len(runs)-1]++
		}
	}
	if !slices.Equal(runs, []int{3, 2, 4}) || len(p.Images) != 3 || p.Images[1].Index != 1 {
		t.Errorf("pad runs %v, images %v", runs, p.Images)
	}
	// The budget: the prompt is the rendering with one placeholder an
	// image plus the images' tokens beyond it.
	one := RenderRequest{Messages: []Message{
		{Role: "user", Content: []any{textPart("Compare "), ImagePart{Tokens: 1}, textPart(" and "), ImagePart{Tokens: 1}}},
		{Role: "assistant", Content: "They differ."},
		{Role: "user", Content: []any{ImagePart{Tokens: 1}, textPart("And this one?")}},
	}, AddGenerationPrompt: true}
	q, err := tmpl.Encode(tok, one)
	if err != nil {
		t.Fatal(err)
	}
	if req.ImageTokens() != 9 || len(p.IDs) != len(q.IDs)+req.ImageTokens()-3 {
		t.Errorf("%d ids with images, %d with one token each, ImageTokens %d", len(p.IDs), len(q.IDs), req.ImageTokens())
	}
	// A literal <|image_pad|> in the text would shift every image: refused.
	req.Messages[2].Content = []any{ImagePart{Index: 2, Tokens: 4}, textPart("what is " + ImagePadToken + "?")}
	if _, err := tmpl.Render(req); err == nil || !strings.Contains(err.Error(), "4 <|image_pad|> for 3 images") {
		t.Errorf("a pad in the text: %v", err)
	}
	// An image in the system message: the template's own refusal.
	req.Messages = append([]Message{{Role: "system", Content: []any{ImagePart{Tokens: 1}}}}, req.Messages[:2]...)
	if _, err := tmpl.Render(req); err == nil || !strings.Contains(err.Error(), "System message cannot contain images") {
		t.Errorf("an image in the system message: %v", err)
	}
}
