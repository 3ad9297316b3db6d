package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/app/store"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/imageproc"
	"github.com/suzuran-app/suzuran/engine/model"
)

// ImageView is an image attached in the window: what the composer's
// thumbnail shows (its token cost among it) and what Send names it by
// (SHA256).
type ImageView struct {
	Image store.Image `json:"image"`
	// URL is a data: URL the window can show (the file itself, or a PNG
	// of it for a format a browser does not show).
	URL string `json:"url"`
	// SeenWidth and SeenHeight are the size the model sees it at.
	SeenWidth  int `json:"seenWidth"`
	SeenHeight int `json:"seenHeight"`
	// Note says what was not read as the file holds it (an animated
	// GIF's later frames), or that the loaded model reads no images.
	Note string `json:"note,omitempty"`
}

// pendingImages are the images attached in the window and not sent yet,
// by SHA256.
type pendingImages struct {
	mu     sync.Mutex
	byHash map[string]store.Image
}

// imageMIME is the MIME type of each format imageproc reads.
var imageMIME = map[string]string{
	"png": "image/png", "jpeg": "image/jpeg", "gif": "image/gif", "webp": "image/webp",
	"bmp": "image/bmp", "tiff": "image/tiff", "heic": "image/heic",
}

// browserShows are the formats the window's web view shows as they are.
var browserShows = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true, "image/bmp": true}

// imageConfig is the image processor of the loaded model (the one
// Qwen3.6 ships when no model is loaded or it has none), at the window's
// size limit, and whether the model reads images.
func (s *Service) imageConfig() (imageproc.Config, bool) {
	cfg, vision := imageproc.Qwen36Config(), true
	if e := s.models.TryAcquire(); e != nil {
		if c, err := imageproc.LoadConfig(e.Dir()); err == nil {
			cfg = c
		}
		vision = e.Config().Vision != nil
		s.models.Release()
	}
	return cfg.WithMaxPixels(imageproc.DefaultMaxPixels), vision
}

// AttachImage reads an image file dropped, pasted or chosen in the window
// (its bytes in base64): its size, its cost in tokens and a picture to
// show. It stays attached until sent or removed.
func (s *Service) AttachImage(name, dataBase64 string) (ImageView, error) {
	if n := base64.StdEncoding.DecodedLen(len(dataBase64)); n > imageproc.MaxFileBytes+2 {
		return ImageView{}, fmt.Errorf("%s is larger than the %d MB an image may be: export a smaller copy", name, imageproc.MaxFileBytes>>20)
	}
	data, err := base64.StdEncoding.DecodeString(dataBase64)
	if err != nil {
		return ImageView{}, fmt.Errorf("%s: the window sent the image garbled (%v): attach it again", name, err)
	}
	return s.attachImage(baseName(name), data, 0)
}

func (s *Service) attachImage(name string, data []byte, page int) (ImageView, error) {
	if len(data) > imageproc.MaxFileBytes {
		return ImageView{}, fmt.Errorf("%s is larger than the %d MB an image may be: export a smaller copy", name, imageproc.MaxFileBytes>>20)
	}
	img, info, err := imageproc.Decode(data)
	if err != nil {
		return ImageView{}, fmt.Errorf("%s: %w", name, err)
	}
	cfg, vision := s.imageConfig()
	h, w, err := cfg.SmartResize(img.Height, img.Width)
	if err != nil {
		return ImageView{}, fmt.Errorf("%s: %w", name, err)
	}
	tokens, err := cfg.TokenCost(img.Width, img.Height)
	if err != nil {
		return ImageView{}, fmt.Errorf("%s: %w", name, err)
	}
	im := store.Image{SHA256: store.HashImage(data), Name: name, MIME: imageMIME[info.Format], Width: img.Width, Height: img.Height,
		Size: int64(len(data)), Tokens: tokens, Page: page, Data: data}
	if im.MIME == "" {
		im.MIME = "image/" + info.Format
	}
	v := ImageView{Image: im, SeenWidth: w, SeenHeight: h, Note: info.Note}
	if v.URL, err = imageURL(im.MIME, data, img); err != nil {
		return ImageView{}, fmt.Errorf("%s: %w", name, err)
	}
	if !vision {
		v.Note = noVisionNote
	}
	s.images.mu.Lock()
	if s.images.byHash == nil {
		s.images.byHash = map[string]store.Image{}
	}
	s.images.byHash[im.SHA256] = im
	s.images.mu.Unlock()
	v.Image.Data = nil
	return v, nil
}

// noVisionNote is what an image's chip says under a model without a
// vision tower (the demo model).
const noVisionNote = "the loaded model reads no images: it is kept with the question, and a model that reads images (Qwen3.6) answers it"

// imageURL is a data: URL of an image: its own bytes where the window
// shows the format, else a PNG of its pixels.
func imageURL(mime string, data []byte, img *imageproc.RGB) (string, error) {
	if !browserShows[mime] {
		if img == nil {
			var err error
			if img, _, err = imageproc.Decode(data); err != nil {
				return "", err
			}
		}
		rgba := image.NewNRGBA(image.Rect(0, 0, img.Width, img.Height))
		for i := 0; i < img.Width*img.Height; i++ {
			copy(rgba.Pix[4*i:4*i+3], img.Pix[3*i:3*i+3])
			rgba.Pix[4*i+3] = 255
		}
		var b bytes.Buffer
		if err := png.Encode(&b, rgba); err != nil {
			return "", err
		}
		mime, data = "image/png", b.Bytes()
	}
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data), nil
}

// RemoveImage forgets an attached image that was not sent.
func (s *Service) RemoveImage(sha string) {
	s.images.mu.Lock()
	delete(s.images.byHash, sha)
	s.images.mu.Unlock()
}

// readyImages returns the attached images named by hash, in order.
func (s *Service) readyImages(hashes []string) ([]store.Image, error) {
	s.images.mu.Lock()
	defer s.images.mu.Unlock()
	out := make([]store.Image, 0, len(hashes))
	for _, h := range hashes {
		im, ok := s.images.byHash[h]
		if !ok {
			return nil, fmt.Errorf("the image %.12s… is no longer attached: attach it again", h)
		}
		out = append(out, im)
	}
	return out, nil
}

// dropImages forgets sent images.
func (s *Service) dropImages(hashes []string) {
	for _, h := range hashes {
		s.RemoveImage(h)
	}
}

// imageTokens is what images cost in the context.
func imageTokens(images []store.Image) int {
	n := 0
	for _, im := range images {
		n += im.Tokens
	}
	return n
}

// checkImages refuses, before anything is stored, images that leave no
// room for the answer beside the conversation and the question. Like
// checkQuestion it checks nothing while the model is not loaded.
func (s *Service) checkImages(conversation int64, question string, think bool, images []store.Image) error {
	if len(images) == 0 {
		return nil
	}
	e := s.models.TryAcquire()
	if e == nil {
		return nil
	}
	defer s.models.Release()
	b, err := s.budget(e, conversation, question, think)
	if err != nil {
		return err
	}
	if n := imageTokens(images); b.ConversationTokens+n+b.AnswerTokens > b.ContextTokens {
		return errors.New(imagesOverMessage(len(images), n, b))
	}
	return nil
}

// imagesOverMessage says that images do not fit and what to do; b counts
// the conversation without them.
func imagesOverMessage(count, tokens int, b docs.Budget) string {
	conv := b.ConversationTokens
	return fmt.Sprintf("The %s take %s tokens; with the conversation's %s and %s kept for the answer that is more than the model's context of %s tokens. Send fewer images, smaller ones (a crop or a screenshot of the part that matters), or start a new conversation.",
		plural(count, "image"), thousands(tokens), thousands(conv), thousands(b.AnswerTokens), thousands(b.ContextTokens))
}

// imageIDPrefix starts the id of an image's chip (AttachmentView.ID),
// before the image's SHA256.
const imageIDPrefix = "image-"

// splitImageIDs parts chip ids into documents' ids and images' hashes.
func splitImageIDs(ids []string) (docIDs, hashes []string) {
	for _, id := range ids {
		if sha, ok := strings.CutPrefix(id, imageIDPrefix); ok {
			hashes = append(hashes, sha)
		} else {
			docIDs = append(docIDs, id)
		}
	}
	return docIDs, hashes
}

// imageAttachment is the chip of an image file: ready at once with its
// picture and cost, or failed saying why.
func (s *Service) imageAttachment(name string, read func() ([]byte, error)) AttachmentView {
	data, err := read()
	var v ImageView
	if err == nil {
		v, err = s.attachImage(name, data, 0)
	}
	if err != nil {
		return AttachmentView{ID: imageIDPrefix + "failed-" + store.HashImage([]byte(name)), Name: name, State: AttachmentFailed,
			Error: strings.TrimPrefix(err.Error(), name+": ")}
	}
	return AttachmentView{ID: imageIDPrefix + v.Image.SHA256, Name: name, State: AttachmentReady, Image: &v}
}

// isImageFile says whether the file at path starts as an image does.
func isImageFile(path string) bool {
	// Only a regular file is opened: a named pipe would block the open.
	if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
		return false
	}
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	head := make([]byte, 16)
	n, _ := io.ReadFull(f, head)
	return imageproc.Sniff(head[:n]) != ""
}

// readImageFile reads an image file, refusing one over the size an image
// may be before reading it.
func readImageFile(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.Size() > imageproc.MaxFileBytes {
		return nil, fmt.Errorf("is larger than the %d MB an image may be: export a smaller copy", imageproc.MaxFileBytes>>20)
	}
	return os.ReadFile(path)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return thousands(n) + " " + what + "s"
}

// withImages turns a question's text into content parts with its images
// before the text, numbering them from first (the index of each image in
// the conversation's order, promptImages).
func withImages(content string, images []store.Image, first int) any {
	if len(images) == 0 {
		return content
	}
	parts := make([]any, 0, len(images)+1)
	for i, im := range images {
		parts = append(parts, chat.ImagePart{Index: first + i, Tokens: im.Tokens})
	}
	text := chat.NewObject()
	text.Set("type", "text")
	text.Set("text", content)
	return append(parts, text)
}

// promptImages lists the images of the messages before message id before
// (all when 0), in the order promptMessages numbers them.
func promptImages(history []store.Message, before int64) []store.Image {
	var out []store.Image
	for _, m := range history {
		if before != 0 && m.ID >= before {
			break
		}
		out = append(out, m.Images...)
	}
	return out
}

// engineImages reads the prompt's images (chat.Prompt.Images, pointing
// into the conversation's images) from the store through the model's
// image processor. Each is keyed by the hash of its bytes, so that the
// engine's prefix cache encodes an image once for a conversation.
func (s *Service) engineImages(ctx context.Context, e *engine.Engine, parts []chat.ImagePart, images []store.Image) ([]model.Image, error) {
	if len(parts) == 0 {
		return nil, nil
	}
	if e.Config().Vision == nil {
		return nil, fmt.Errorf("%w: the loaded model has no vision tower; choose a model that reads images (Qwen3.6) in Settings and press Regenerate", engine.ErrNoVision)
	}
	cfg, err := imageproc.LoadConfig(e.Dir())
	if err != nil {
		return nil, err
	}
	cfg = cfg.WithMaxPixels(imageproc.DefaultMaxPixels)
	out := make([]model.Image, len(parts))
	for i, p := range parts {
		if p.Index < 0 || p.Index >= len(images) {
			return nil, errors.New("an image of the prompt is not in the conversation")
		}
		im := images[p.Index]
		data, err := s.store.ImageData(ctx, im.SHA256)
		if err != nil {
			return nil, err
		}
		rgb, _, err := imageproc.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", im.Name, err)
		}
		px, err := cfg.Process(rgb)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", im.Name, err)
		}
		out[i] = model.Image{Pixels: px.Values, Grid: px.Grid, Hash: sha256.Sum256(data)}
	}
	return out, nil
}

// ImageURL returns a data: URL of a stored image, for a sent message's
// thumbnail.
func (s *Service) ImageURL(sha string) (string, error) {
	data, err := s.store.ImageData(context.Background(), sha)
	if err != nil {
		return "", err
	}
	im, err := imageproc.Probe(data)
	if err != nil {
		return "", err
	}
	return imageURL(imageMIME[im.Format], data, nil)
}

// AttachImage takes an image dropped, pasted or chosen in the window (its
// bytes in base64): its size, token cost and a picture to show.
func (u *UI) AttachImage(name string, dataBase64 string) (ImageView, error) {
	return u.s.AttachImage(name, dataBase64)
}

// RemoveImage forgets an attached image before it is sent.
func (u *UI) RemoveImage(sha string) { u.s.RemoveImage(sha) }

// ImageURL returns a sent image as a data: URL, for its thumbnail.
func (u *UI) ImageURL(sha string) (string, error) { return u.s.ImageURL(sha) }
