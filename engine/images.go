package engine

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/suzuran-app/suzuran/engine/model"
)

// Images in a request: the tower's embeddings go in at the <|image_pad|>
// rows, every prompt row gets its M-RoPE position, and the prefix cache
// keys the prompt with each image's pad run replaced by ids derived from
// the image's hash (imageKey), so that the same tokens around another
// image never match and the same image always does.

// ErrNoVision is wrapped by the error Submit returns for a request with
// images to a model or backend that does not read them (a client error).
var ErrNoVision = errors.New("this model does not read images")

// validateImages checks a request's images against the model, the backend
// and the prompt's pad runs.
func (e *Engine) validateImages(req *Request) error {
	if len(req.Images) == 0 {
		return nil
	}
	vc := e.weights.Config.Vision
	if vc == nil || e.opts.Vision == nil {
		return fmt.Errorf("%w: %s has no vision tower", ErrNoVision, e.weights.Config.ModelType)
	}
	b := e.currentBackend()
	if _, ok := b.(model.VisionEncoder); !ok {
		return fmt.Errorf("%w on the %s backend yet: use the CPU backend for prompts with images", ErrNoVision, b.Name())
	}
	if _, ok := b.(model.ImageInputs); !ok {
		return fmt.Errorf("%w on the %s backend yet: use the CPU backend for prompts with images", ErrNoVision, b.Name())
	}
	var grids [][3]int
	for i := range req.Images {
		if err := vc.CheckImage(&req.Images[i]); err != nil {
			return fmt.Errorf("image %d: %w", i, err)
		}
		grids = append(grids, req.Images[i].Grid)
	}
	_, _, err := model.RopePositions(vc, req.Prompt, grids)
	return err
}

// imageRun is one image's run of pad tokens in the prompt.
type imageRun struct {
	start, n int
	image    int
}

// prepareImages sets a request's positions, cache key and pad runs; the
// embeddings are computed later (encodeImages), only for the images the
// prefix cache does not cover.
func (g *generation) prepareImages() error {
	req := &g.job.req
	g.key = req.Prompt
	if len(req.Images) == 0 {
		return nil
	}
	vc := g.e.weights.Config.Vision
	var grids [][3]int
	for i := range req.Images {
		grids = append(grids, req.Images[i].Grid)
	}
	pos, _, err := model.RopePositions(vc, req.Prompt, grids)
	if err != nil {
		return err
	}
	g.positions = pos
	g.key = append([]int(nil), req.Prompt...)
	for t := 0; t < len(req.Prompt); {
		if req.Prompt[t] != vc.ImageTokenID {
			t++
			continue
		}
		r := imageRun{start: t, image: len(g.runs)}
		for t < len(req.Prompt) && req.Prompt[t] == vc.ImageTokenID {
			g.key[t] = imageKey(&req.Images[r.image].Hash, t-r.start)
			t++
		}
		r.n = t - r.start
		g.runs = append(g.runs, r)
	}
	g.embeds = make([][]float32, len(req.Prompt))
	return nil
}

// imageKey is the cache key id of pad token i of an image with the given
// hash: negative, so no token id equals it, and cycling through the hash's
// eight 31-bit words.
func imageKey(hash *[32]byte, i int) int {
	return -1 - int(binary.LittleEndian.Uint32(hash[4*(i%8):])>>1)
}

// encodeImages starts the tower on every image whose pad rows the sequence
// has still to read (from g.pos on), once per request, and reports whether
// the request must wait for it. The tower (its weights read on the first
// image, then each image) runs on a goroutine of its own, so that the
// engine goroutine keeps running the other requests' decode steps and
// prefill chunks meanwhile; collectEncode takes its embeddings back. The
// embeddings kept by image hash are looked up and filled in here, on the
// engine goroutine, which alone uses that cache.
func (g *generation) encodeImages() (wait bool, err error) {
	if g.encoded || len(g.runs) == 0 {
		return false, nil
	}
	if g.encoding != nil {
		return true, nil
	}
	W := g.e.weights.Config.HiddenSize
	var todo []imageRun
	for _, r := range g.runs {
		if r.start+r.n <= g.pos {
			continue // restored from the prefix cache
		}
		im := &g.job.req.Images[r.image]
		if out := g.e.embeds.get(im.Hash, im.Grid, r.n*W); out != nil {
			g.fill(r, out)
			continue
		}
		todo = append(todo, r)
	}
	if len(todo) == 0 {
		g.encoded = true
		return false, nil
	}
	done := make(chan encodeResult, 1)
	g.encoding = done
	enc := g.e.backend.(model.VisionEncoder)
	vision := g.e.opts.Vision
	images := g.job.req.Images
	g.e.encodes.Add(1)
	go func() {
		defer g.e.encodes.Done()
		res := encodeResult{runs: todo}
		defer func() {
			done <- res
			g.e.signal()
		}()
		vw, err := vision()
		if err != nil {
			res.err = fmt.Errorf("loading the vision tower: %w", err)
			return
		}
		for _, r := range todo {
			if g.cancelled() {
				res.err = errCancelled
				return
			}
			out, err := enc.EncodeImage(vw, &images[r.image])
			if err != nil {
				res.err = fmt.Errorf("image %d: %w", r.image, err)
				return
			}
			res.outs = append(res.outs, out)
		}
	}()
	return true, nil
}

// encodeResult is what an encode goroutine hands back: the embeddings of
// runs, in order, or the error that ended it.
type encodeResult struct {
	runs []imageRun
	outs [][]float32
	err  error
}

// collectEncode takes the embeddings of a finished encode into the
// request and the cache kept by image hash, on the engine goroutine. It
// reports false while the encode is still running.
func (g *generation) collectEncode() (bool, error) {
	select {
	case res := <-g.encoding:
		g.encoding = nil
		for i, out := range res.outs {
			r := res.runs[i]
			im := &g.job.req.Images[r.image]
			g.stats.ImagesEncoded++
			g.e.embeds.put(im.Hash, im.Grid, out)
			g.fill(r, out)
		}
		if res.err != nil {
			return true, res.err
		}
		g.encoded = true
		return true, nil
	default:
		return false, nil
	}
}

// fill points run r's pad rows at the image's embeddings.
func (g *generation) fill(r imageRun, out []float32) {
	W := g.e.weights.Config.HiddenSize
	for i := range r.n {
		g.embeds[r.start+i] = out[i*W : (i+1)*W]
	}
}

// input is the pass input over prompt rows [lo, hi) with their image
// embeddings and positions.
func (g *generation) input(lo, hi int) model.Input {
	in := model.Input{IDs: g.job.req.Prompt[lo:hi]}
	if g.positions != nil {
		in.Positions = g.positions[lo:hi]
		in.Embeds = g.embeds[lo:hi]
	}
	return in
}

// embedCacheBytes bounds the embeddings kept by image hash: 64 MiB, eight
// 1,024-token images of the full-size model (2048 floats a token), so that
// the same image in another conversation (or after the prefix cache let
// its snapshot go) is not encoded again.
const embedCacheBytes = 64 << 20

// embedCache holds the latest images' embeddings by hash, the least
// recently used dropped first. Only the engine goroutine uses it.
type embedCache struct {
	entries []embedEntry // least recently used first
	bytes   int
}

type embedEntry struct {
	hash   [32]byte
	grid   [3]int // the same bytes resized for another size limit differ
	embeds []float32
}

// get returns the embeddings of the image with hash and grid, when they
// are kept and have n values, and marks them used.
func (c *embedCache) get(hash [32]byte, grid [3]int, n int) []float32 {
	for i, e := range c.entries {
		if e.hash == hash && e.grid == grid && len(e.embeds) == n {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			return e.embeds
		}
	}
	return nil
}

// put keeps embeds for hash, dropping the oldest entries past the bound.
func (c *embedCache) put(hash [32]byte, grid [3]int, embeds []float32) {
	size := 4 * len(embeds)
	if size > embedCacheBytes {
		return
	}
	for c.bytes+size > embedCacheBytes && len(c.entries) > 0 {
		c.bytes -= 4 * len(c.entries[0].embeds)
		c.entries = c.entries[1:]
	}
	c.entries = append(c.entries, embedEntry{hash: hash, grid: grid, embeds: embeds})
	c.bytes += size
}
