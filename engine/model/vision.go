package model

import "fmt"

// VisionConfig is the vision tower's configuration (config.json's
// vision_config) and the image tokens of the wrapper config.
type VisionConfig struct {
	Depth             int // blocks
	HiddenSize        int
	NumHeads          int
	Intermediate      int // MLP width
	InChannels        int // 3
	PatchSize         int // 16
	TemporalPatchSize int // 2
	SpatialMerge      int // 2: the merger joins SpatialMerge² neighbouring patches
	OutHiddenSize     int // the text model's hidden size
	NumPositions      int // learned position embeddings, a square grid
	RopeTheta         float64
	// LayerNormEps is the epsilon of every LayerNorm of the tower (1e-6,
	// fixed in transformers; a field so a test can change it).
	LayerNormEps float64

	ImageTokenID       int // <|image_pad|>
	VisionStartTokenID int // <|vision_start|>
	VisionEndTokenID   int // <|vision_end|>
}

// PatchWidth is the length of one patch's pixel row: channels ·
// temporal patch · patch · patch (3·2·16·16 = 1536).
func (c *VisionConfig) PatchWidth() int {
	return c.InChannels * c.TemporalPatchSize * c.PatchSize * c.PatchSize
}

// HeadDim is the width of one attention head of the tower.
func (c *VisionConfig) HeadDim() int { return c.HiddenSize / c.NumHeads }

// GridSide is the side of the square grid of learned position embeddings.
func (c *VisionConfig) GridSide() int {
	n := 0
	for (n+1)*(n+1) <= c.NumPositions {
		n++
	}
	return n
}

// VisionBlock is one block of the tower: pre-LayerNorm attention and a
// pre-LayerNorm GELU (tanh) MLP, each added to the residual.
type VisionBlock struct {
	Norm1, Norm1Bias []float32 // [Hidden]
	QKV              Matrix    // [3·Hidden, Hidden]: q, k, v, each heads × HeadDim
	QKVBias          []float32 // [3·Hidden]
	Proj             Matrix    // [Hidden, Hidden]
	ProjBias         []float32
	Norm2, Norm2Bias []float32
	FC1              Matrix // [Intermediate, Hidden]
	FC1Bias          []float32
	FC2              Matrix // [Hidden, Intermediate]
	FC2Bias          []float32
}

// VisionMerger maps each SpatialMerge² group of patches to one text
// embedding: LayerNorm per patch, the group concatenated, fc1, GELU (erf),
// fc2.
type VisionMerger struct {
	Norm, NormBias []float32 // [Hidden]
	FC1            Matrix    // [4·Hidden, 4·Hidden]
	FC1Bias        []float32
	FC2            Matrix // [OutHidden, 4·Hidden]
	FC2Bias        []float32
}

// VisionWeights is the vision tower bound from a checkpoint.
type VisionWeights struct {
	Config VisionConfig
	// PatchEmbed is the patch projection as a matrix [Hidden, PatchWidth]
	// whose columns are in the pixel row's order (channel, frame, row,
	// column), whatever order the checkpoint stored the kernel in.
	PatchEmbed     Matrix
	PatchEmbedBias []float32 // [Hidden]
	PosEmbed       []float32 // [NumPositions, Hidden]
	Blocks         []VisionBlock
	Merger         VisionMerger
}

// Image is one image as the tower takes it: the image processor's patches
// and their grid.
type Image struct {
	// Pixels are [Patches, PatchWidth] f32, in the processor's patch order
	// (2×2 merge groups together, each group's patches row-major).
	Pixels []float32
	// Grid is the image's (temporal, height, width) size in patches.
	Grid [3]int
	// Hash identifies the image's content (sha256 of the original bytes, or
	// of the pixels when there are none), for caches.
	Hash [32]byte
}

// Patches is the number of patches of a grid.
func Patches(grid [3]int) int { return grid[0] * grid[1] * grid[2] }

// Tokens is the number of <|image_pad|> tokens (merged patches) an image of
// grid takes in the prompt.
func (c *VisionConfig) Tokens(grid [3]int) int {
	return Patches(grid) / (c.SpatialMerge * c.SpatialMerge)
}

// CheckImage verifies an image's grid and pixel count against the tower.
func (c *VisionConfig) CheckImage(im *Image) error {
	g := im.Grid
	m := c.SpatialMerge
	if g[0] < 1 || g[1] < 1 || g[2] < 1 || g[1]%m != 0 || g[2]%m != 0 {
		return fmt.Errorf("image grid %v: each size must be positive and the height and width multiples of the merge size %d", g, m)
	}
	if want := Patches(g) * c.PatchWidth(); len(im.Pixels) != want {
		return fmt.Errorf("image grid %v needs %d pixel values (%d patches of %d), got %d", g, want, Patches(g), c.PatchWidth(), len(im.Pixels))
	}
	return nil
}

// VisionEncoder is a Backend that runs the vision tower: Encode returns an
// image's embeddings, [Tokens(grid), OutHiddenSize] row-major, one row per
// <|image_pad|> token in prompt order.
type VisionEncoder interface {
	EncodeImage(w *VisionWeights, im *Image) ([]float32, error)
}

// ImageInputs is a Backend whose passes take Input.Embeds and
// Input.Positions. StartBatch refuses those inputs on any other.
type ImageInputs interface {
	ImageInputs()
}

// RopeAxis is the position axis (0 temporal, 1 height, 2 width) that
// rotary frequency i of a head turns by: interleaved M-RoPE gives height
// the frequencies i ≡ 1 (mod 3) below 3·section[1], width i ≡ 2 (mod 3)
// below 3·section[2], and temporal the rest.
func (c *Config) RopeAxis(i int) int {
	s := c.MRoPESection
	switch {
	case i%3 == 1 && i < 3*s[1]:
		return 1
	case i%3 == 2 && i < 3*s[2]:
		return 2
	}
	return 0
}

// TextPosition is the M-RoPE position of a text token at p: p on all three
// axes.
func TextPosition(p int) [3]int { return [3]int{p, p, p} }

// RopePositions computes every token's M-RoPE position (temporal, height,
// width) for a prompt, as transformers' get_rope_index: text tokens count
// on from the last position, on all three axes; each run of <|image_pad|>
// tokens is the next image, whose merged patch (t, h, w) sits at
// (start+t, start+h, start+w), after which text continues at start +
// max(merged height, merged width). The rope delta is the last position
// plus one minus the number of tokens: decoding continues at Pos + delta.
// A run whose length is not the image's merged patch count is an error
// naming both numbers.
func RopePositions(c *VisionConfig, ids []int, grids [][3]int) ([][3]int, int, error) {
	pos := make([][3]int, len(ids))
	next, image := 0, 0
	for t := 0; t < len(ids); {
		if c == nil || ids[t] != c.ImageTokenID {
			pos[t] = TextPosition(next)
			next++
			t++
			continue
		}
		run := t
		for run < len(ids) && ids[run] == c.ImageTokenID {
			run++
		}
		if image >= len(grids) {
			return nil, 0, fmt.Errorf("the prompt holds more image token runs than the %d images given (run %d at token %d)", len(grids), image, t)
		}
		g := grids[image]
		m := c.SpatialMerge
		gt, gh, gw := g[0], g[1]/m, g[2]/m
		if n := run - t; n != gt*gh*gw {
			return nil, 0, fmt.Errorf("image %d: the prompt has %d <|image_pad|> tokens at token %d, the image's grid %v needs %d", image, n, t, g, gt*gh*gw)
		}
		for i := range gt * gh * gw {
			pos[t+i] = [3]int{next + i/(gh*gw), next + i/gw%gh, next + i%gw}
		}
		next += max(gh, gw)
		t = run
		image++
	}
	if image != len(grids) {
		return nil, 0, fmt.Errorf("%d images given, the prompt holds %d image token runs", len(grids), image)
	}
	return pos, next - len(ids), nil
}
