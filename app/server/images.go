package server

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/imageproc"
	"github.com/suzuran-app/suzuran/engine/model"
)

// Images through the API: OpenAI chat "image_url" parts, Responses
// "input_image" items and Anthropic "image" blocks carry an image's bytes
// (a data: URL or base64); the server fetches nothing, so an http(s) URL,
// a file id or a URL source is a 400. Images go before the message's text
// (and its documents), in the order sent, as the window places attachments
// before the question.
//
// The largest image the model sees follows OpenAI's detail:
//
//   - "low": 512 × 512 pixels (262,144; at most 256 tokens), OpenAI's low
//     resolution;
//   - "auto" or none (and every Anthropic image): imageproc.DefaultMaxPixels
//     (1,310,720; at most 1,280 tokens), the window's default;
//   - "high": 2048 × 2048 pixels (4,194,304; at most 4,096 tokens), the box
//     OpenAI fits a high-detail image into. The checkpoint's own limit (16.7
//     million pixels, about 16,000 tokens) is not offered: one photo would
//     fill a quarter of a 64k context.
//
// Smaller images are not enlarged (the processor's minimum aside).
const (
	lowDetailPixels  = 512 * 512
	highDetailPixels = 2048 * 2048
)

// imagePart is one image of a message, as decoded from its part.
type imagePart struct {
	param     string // where it is in the request, for errors
	data      []byte
	maxPixels int
}

// isImagePart reports whether a content part's type carries an image.
func isImagePart(typ string) bool {
	return typ == "image_url" || typ == "input_image" || typ == "image"
}

// detailPixels maps OpenAI's detail to the largest image the model sees.
func detailPixels(detail, param string) (int, error) {
	switch detail {
	case "", "auto":
		return imageproc.DefaultMaxPixels, nil
	case "low":
		return lowDetailPixels, nil
	case "high":
		return highDetailPixels, nil
	}
	return 0, badRequest(param, "%s %q: use low, high or auto", param, detail)
}

// decodeImagePart reads an image part of any of the three APIs into its
// bytes and size limit. A part that points somewhere (an http(s) URL, a
// file id, a URL source) is refused: this server fetches nothing.
func decodeImagePart(part any, param string) (imagePart, error) {
	var url, detail, urlParam string
	switch stringField(part, "type") {
	case "image_url": // chat completions: {"type": "image_url", "image_url": {"url", "detail"}}
		switch iu := field(part, "image_url").(type) {
		case string:
			url = iu
		case *chat.Object:
			url, detail = stringField(iu, "url"), stringField(iu, "detail")
		default:
			return imagePart{}, badRequest(param+".image_url", "%s: an image_url part needs an image_url object with a url (a data: URL)", param)
		}
		urlParam = param + ".image_url.url"
		if _, err := detailPixels(detail, param+".image_url.detail"); err != nil {
			return imagePart{}, err
		}
	case "input_image": // Responses: {"type": "input_image", "image_url", "detail"}
		if stringField(part, "file_id") != "" {
			return imagePart{}, badRequest(param+".file_id", "%s.file_id: this server keeps no files; send the image as image_url, a data: URL (base64)", param)
		}
		url, detail, urlParam = stringField(part, "image_url"), stringField(part, "detail"), param+".image_url"
		if _, err := detailPixels(detail, param+".detail"); err != nil {
			return imagePart{}, err
		}
	case "image": // Anthropic: {"type": "image", "source": {"type": "base64", "media_type", "data"}}
		src := field(part, "source")
		switch typ := stringField(src, "type"); typ {
		case "base64":
			data, err := base64.StdEncoding.DecodeString(stringField(src, "data"))
			if err != nil {
				return imagePart{}, badRequest(param+".source.data", "%s.source.data is not base64: %v", param, err)
			}
			return checkImageBytes(imagePart{param: param + ".source", data: data, maxPixels: imageproc.DefaultMaxPixels})
		case "url":
			return imagePart{}, badRequest(param+".source.url", "%s.source.url: this server fetches nothing; send the image as a base64 source", param)
		default:
			return imagePart{}, badRequest(param+".source.type", "%s.source.type %q: send the image as a base64 source", param, typ)
		}
	}
	max, _ := detailPixels(detail, "")
	rest, ok := strings.CutPrefix(url, "data:")
	if !ok {
		if lower := strings.ToLower(url); strings.HasPrefix(lower, "http://") || strings.HasPrefix(lower, "https://") {
			return imagePart{}, badRequest(urlParam, "%s: this server fetches nothing; send the image's bytes as a data: URL (data:image/png;base64,…)", urlParam)
		}
		return imagePart{}, badRequest(urlParam, "%s must be a data: URL (data:image/png;base64,…)", urlParam)
	}
	header, payload, found := strings.Cut(rest, ",")
	if !found || !strings.HasSuffix(header, ";base64") {
		return imagePart{}, badRequest(urlParam, "%s is a data: URL without ;base64,: send the image base64-encoded", urlParam)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return imagePart{}, badRequest(urlParam, "%s is not base64: %v", urlParam, err)
	}
	return checkImageBytes(imagePart{param: urlParam, data: data, maxPixels: max})
}

// checkImageBytes refuses an image larger than an image file may be.
func checkImageBytes(p imagePart) (imagePart, error) {
	if len(p.data) == 0 {
		return imagePart{}, badRequest(p.param, "%s holds no image", p.param)
	}
	if len(p.data) > imageproc.MaxFileBytes {
		return imagePart{}, badRequest(p.param, "%s: the image is larger than the %d MB an image may be: send a smaller copy", p.param, imageproc.MaxFileBytes>>20)
	}
	return p, nil
}

// readImages decodes the images of message content dc (imageproc's
// limits: a decompression bomb is refused from its header) through the
// model's image processor, appends them to the turn's images and returns
// the content's parts: the images, then text. A model without a vision
// tower refuses them.
func (s *Server) readImages(e *engine.Engine, t *chatTurn, parts []imagePart, text string) ([]any, error) {
	if e.Config().Vision == nil {
		return nil, badRequest(parts[0].param, "%s: %v: %s has no vision tower; send text only, or serve a model that reads images (Qwen3.6)", parts[0].param, engine.ErrNoVision, e.Config().ModelType)
	}
	cfg, err := imageproc.LoadConfig(e.Dir())
	if err != nil {
		return nil, badRequest(parts[0].param, "%s: %v", parts[0].param, err)
	}
	var content []any
	for _, p := range parts {
		img, info, err := imageproc.Decode(p.data)
		if err != nil {
			if errors.Is(err, imageproc.ErrTooLarge) {
				return nil, badRequest(p.param, "%s: %v: the model reads images up to %d megapixels; send a smaller copy", p.param, err, imageproc.MaxDecodePixels/1_000_000)
			}
			return nil, badRequest(p.param, "%s: the image could not be read: %v", p.param, err)
		}
		px, err := cfg.WithMaxPixels(p.maxPixels).Process(img)
		if err != nil {
			return nil, badRequest(p.param, "%s: %v", p.param, err)
		}
		s.log.Info().Str("image", p.param).Str("format", info.Format).Int("bytes", len(p.data)).
			Int("width", info.Width).Int("height", info.Height).Int("resized_width", px.Width).
			Int("resized_height", px.Height).Int("tokens", px.Tokens).Msg("image read")
		content = append(content, chat.ImagePart{Index: len(t.images), Tokens: px.Tokens})
		t.images = append(t.images, model.Image{Pixels: px.Values, Grid: px.Grid, Hash: sha256.Sum256(p.data)})
		t.imageTokens += px.Tokens
	}
	if text != "" {
		obj := chat.NewObject()
		obj.Set("type", "text")
		obj.Set("text", text)
		content = append(content, obj)
	}
	return content, nil
}
