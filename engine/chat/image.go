package chat

import (
	"fmt"
	"strings"
)

// ImagePart is an image content part of a message, in Content's list of
// parts beside the text parts. The image itself stays with the request:
// Index points into the request's images (the order the caller keeps them
// in, opaque here). The template sees {"type": "image"} and prints
// <|vision_start|><|image_pad|><|vision_end|>; the rendered prompt then
// holds Tokens <|image_pad|> in its place, the image's merged token count
// (imageproc's Pixels.Tokens or Config.TokenCost), as transformers'
// processor expands it.
type ImagePart struct {
	Index  int
	Tokens int
}

// ImagePadToken is the placeholder the template prints once per image and
// the prompt repeats once per merged patch.
const ImagePadToken = "<|image_pad|>"

// imageSlot is what the template prints a <|image_pad|> for, in order:
// an ImagePart, or an image part as a client sent it (a JSON object), which
// the template prints once and nothing expands.
type imageSlot struct {
	part  ImagePart
	isNew bool
}

// imageSlots lists the image parts of the messages in the order the
// template renders them (message by message, part by part) and whether any
// is an ImagePart.
func imageSlots(msgs []Message) ([]imageSlot, bool) {
	var slots []imageSlot
	found := false
	for _, m := range msgs {
		parts, ok := m.Content.([]any)
		if !ok {
			continue
		}
		for _, p := range parts {
			switch p := p.(type) {
			case ImagePart:
				slots, found = append(slots, imageSlot{part: p, isNew: true}), true
			case *ImagePart:
				slots, found = append(slots, imageSlot{part: *p, isNew: true}), true
			case *Object:
				// The template's own test for an image part.
				_, img := p.Get("image")
				_, url := p.Get("image_url")
				typ, _ := p.Get("type")
				if img || url || typ == "image" {
					slots = append(slots, imageSlot{part: ImagePart{Tokens: 1}})
				}
			}
		}
	}
	return slots, found
}

// Images returns the request's ImageParts in prompt order: the k-th run of
// <|image_pad|> in the prompt is the k-th of them.
func (req RenderRequest) Images() []ImagePart {
	slots, _ := imageSlots(req.Messages)
	var out []ImagePart
	for _, s := range slots {
		if s.isNew {
			out = append(out, s.part)
		}
	}
	return out
}

// ImageTokens is the number of <|image_pad|> tokens the request's
// ImageParts take in the prompt, for a token budget that counts a
// conversation's images before it is rendered.
func (req RenderRequest) ImageTokens() int {
	n := 0
	for _, p := range req.Images() {
		n += p.Tokens
	}
	return n
}

// expandImages replaces the k-th <|image_pad|> of the rendered text by the
// k-th image slot's token count. Without ImageParts the text is left as
// it is.
func expandImages(text string, msgs []Message) (string, error) {
	slots, found := imageSlots(msgs)
	if !found {
		return text, nil
	}
	if n := strings.Count(text, ImagePadToken); n != len(slots) {
		return "", fmt.Errorf("the prompt holds %d %s for %d images: a message's text contains %s itself, or the template drops an image; remove it from the text", n, ImagePadToken, len(slots), ImagePadToken)
	}
	var b strings.Builder
	b.Grow(len(text) + len(ImagePadToken)*len(slots))
	rest := text
	for _, s := range slots {
		if s.part.Tokens <= 0 {
			return "", fmt.Errorf("image %d has %d tokens: give it its merged token count", s.part.Index, s.part.Tokens)
		}
		i := strings.Index(rest, ImagePadToken)
		b.WriteString(rest[:i])
		b.WriteString(strings.Repeat(ImagePadToken, s.part.Tokens))
		rest = rest[i+len(ImagePadToken):]
	}
	b.WriteString(rest)
	return b.String(), nil
}
