package imageproc

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// fuzzLimit keeps the fuzzer's images small (4 MP) so that a header it
// makes up cannot take the machine's memory; the limit is the code under
// test, as MaxDecodePixels is for Decode.
const fuzzLimit = 1 << 22

// FuzzDecode feeds arbitrary bytes to the decoding entry point: it must
// return an image that matches its Info or an error, never panic, and
// never decode more pixels than the limit.
func FuzzDecode(f *testing.F) {
	for _, data := range samples(f) {
		f.Add(data)
	}
	entries, err := os.ReadDir("testdata")
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".png", ".jpg", ".webp", ".heic":
			f.Add(readTestdata(f, e.Name()))
		}
	}
	f.Add(rawPNG(30000, 30000, 2, 8, nil))
	f.Add(rawPNG(3, 2, 4, 8, [][]byte{{1, 2, 3, 4, 5, 6}, {7, 8, 9, 10, 11, 12}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		// A watchdog: a 4 MP image decodes in well under a second even on
		// this loaded machine, so a file still decoding after 10 s is a
		// hang (which would never return to a deferred check); the panic
		// makes the fuzzer keep the input.
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("decoding %d bytes did not finish in 10 s", len(data))) })
		defer watchdog.Stop()
		img, info, err := DecodeLimit(data, fuzzLimit)
		if err != nil {
			if img != nil {
				t.Fatalf("an image and an error: %v", err)
			}
			return
		}
		if img.Width != info.Width || img.Height != info.Height || len(img.Pix) != 3*img.Width*img.Height {
			t.Fatalf("image %d × %d (%d bytes), info %d × %d", img.Width, img.Height, len(img.Pix), info.Width, info.Height)
		}
		if img.Width*img.Height > fuzzLimit {
			t.Fatalf("decoded %d × %d, above the limit", img.Width, img.Height)
		}
		if p, err := Qwen36Config().WithMaxPixels(1 << 16).Process(img); err == nil && len(p.Values) != p.Patches()*p.PatchDim {
			t.Fatalf("%d values for %d patches", len(p.Values), p.Patches())
		}
	})
}
