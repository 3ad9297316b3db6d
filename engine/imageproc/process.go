package imageproc

import (
	"fmt"
)

// Pixels is one image as the vision tower reads it: transformers'
// pixel_values and image_grid_thw.
type Pixels struct {
	// Values is the [Patches(), PatchDim] matrix, row-major.
	Values []float32
	// Grid is (t, h, w) in patches.
	Grid [3]int
	// PatchDim is the width of a row (1536 for Qwen3.6).
	PatchDim int
	// Tokens is the image's merged token count, t·h·w / merge²: the number
	// of <|image_pad|> tokens it takes in the prompt.
	Tokens int
	// Height and Width are the resized image's size in pixels.
	Height, Width int
}

// Patches is the number of rows of Values, t·h·w.
func (p *Pixels) Patches() int { return p.Grid[0] * p.Grid[1] * p.Grid[2] }

// Process resizes, normalises and cuts img into patches as the reference
// processor does.
func (c Config) Process(img *RGB) (*Pixels, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	oh, ow, err := c.SmartResize(img.Height, img.Width)
	if err != nil {
		return nil, err
	}
	if len(img.Pix) != 3*img.Width*img.Height {
		return nil, fmt.Errorf("image of %d × %d pixels holds %d bytes, not %d", img.Width, img.Height, len(img.Pix), 3*img.Width*img.Height)
	}
	resized := resizeUint8(img, oh, ow)
	return c.patches(resized, oh, ow), nil
}

// patches normalises the resized uint8 image and lays it out as the
// processor's view and permute: rows (t, h/m, w/m, m, m), columns
// (channel, frame, patch row, patch column); a still image fills every
// frame of the temporal patch.
func (c Config) patches(pix []uint8, oh, ow int) *Pixels {
	p, m, tp := c.PatchSize, c.MergeSize, c.TemporalPatchSize
	gh, gw := oh/p, ow/p
	dim := c.PatchDim()
	out := &Pixels{Grid: [3]int{1, gh, gw}, PatchDim: dim, Height: oh, Width: ow}
	out.Tokens = gh * gw / (m * m)
	out.Values = make([]float32, gh*gw*dim)
	// The fused rescale and normalisation: (x - mean/scale) / (std/scale)
	// in float32.
	var mean, std [3]float32
	for ch := 0; ch < 3; ch++ {
		mean[ch] = float32(c.Mean[ch] / c.RescaleFactor)
		std[ch] = float32(c.Std[ch] / c.RescaleFactor)
	}
	var lut [3][256]float32
	for ch := 0; ch < 3; ch++ {
		for v := 0; v < 256; v++ {
			lut[ch][v] = (float32(v) - mean[ch]) / std[ch]
		}
	}
	row := 0
	for bh := 0; bh < gh/m; bh++ {
		for bw := 0; bw < gw/m; bw++ {
			for mh := 0; mh < m; mh++ {
				for mw := 0; mw < m; mw++ {
					y0, x0 := (bh*m+mh)*p, (bw*m+mw)*p
					dst := out.Values[row*dim : (row+1)*dim]
					k := 0
					for ch := 0; ch < 3; ch++ {
						for f := 0; f < tp; f++ {
							for py := 0; py < p; py++ {
								src := pix[3*((y0+py)*ow+x0):]
								for px := 0; px < p; px++ {
									dst[k] = lut[ch][src[3*px+ch]]
									k++
								}
							}
						}
					}
					row++
				}
			}
		}
	}
	return out
}
