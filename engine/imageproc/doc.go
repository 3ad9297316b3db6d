// Package imageproc turns an image file into what Qwen3.6's vision tower
// reads: transformers' pixel_values and image_grid_thw, as its
// Qwen2VLImageProcessorFast computes them from the checkpoint's
// preprocessor_config.json.
//
// The steps, each as the reference takes it:
//
//   - Decode (Decode, Probe): PNG, JPEG (EXIF orientation applied, as
//     transformers' load_image applies ImageOps.exif_transpose), GIF (the
//     first frame; an animated GIF says so in Info.Note), WebP, BMP and TIFF.
//     HEIC is read on macOS by the system's ImageIO (through purego), and
//     refused elsewhere with a message saying to convert it (ErrHEIC). The
//     size is read from the header first, and an image over MaxDecodePixels
//     is refused before its pixels are allocated.
//   - Convert to 8-bit RGB as PIL's convert("RGB") does, which is what
//     transformers' convert_to_rgb calls: alpha is dropped, not composited
//     (a pixel keeps its stored colour whatever its opacity), grey is
//     repeated in the three channels, 16-bit samples keep their high byte,
//     CMYK becomes (255-C)(255-K)/255 rounded as PIL's MULDIV255. The
//     colours are those of the libraries PIL decodes with: JPEG chroma
//     upsampled and converted as libjpeg does (within its inverse DCT's
//     rounding), lossy WebP as libwebp does (exactly), a GIF's first frame
//     on its logical screen with every index's palette colour.
//   - SmartResize: the size is rounded to multiples of patch × merge (32)
//     keeping the aspect ratio, with the pixel count between the minimum and
//     maximum (size.shortest_edge and size.longest_edge, pixel counts).
//   - Resize with the antialiased bicubic filter (a = -0.5, the support
//     widened by the scale when shrinking) that torchvision's resize runs on
//     the uint8 image: horizontal pass, then vertical, rounded to uint8.
//   - Normalise: (x - 255·mean) / (255·std) in float32, the fused rescale
//     and normalisation of the processor.
//   - Cut patches: a still image is repeated to temporal_patch_size frames;
//     rows run over (t, h/merge, w/merge, merge row, merge column), columns
//     over (channel, frame, patch row, patch column): [patches, 3·2·16·16].
//
// The model sees at most Config.MaxPixels pixels of an image; WithMaxPixels
// lowers the checkpoint's limit (16.7 million pixels) to a setting, by
// default DefaultMaxPixels. TokenCost gives an image's token count from its
// dimensions alone, so that the cost can be shown before anything is sent.
package imageproc
