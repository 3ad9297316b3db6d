// Command fakehub serves a model folder as a Hugging Face hub repository
// (package fakehub) for the browser end-to-end test, which points `suzuran
// ui` at it with HF_ENDPOINT. It prints "fakehub at <url>" once it listens
// and runs until its standard input closes or it is killed.
//
//	go run ./app/internal/fakehub/cmd/fakehub -dir engine/internal/fixtures/testdata/qwen35moe-tiny/mlx-4bit
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/suzuran-app/suzuran/app/hub"
	"github.com/suzuran-app/suzuran/app/internal/fakehub"
)

func main() {
	repo := flag.String("repo", hub.DefaultRepo, "the repository id to serve the folder as")
	dir := flag.String("dir", "", "the model folder to serve (required)")
	rate := flag.Int("rate", 0, "bytes a second for each .safetensors file (0: full speed), so that progress can be watched")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "fakehub: -dir is required: the model folder to serve")
		os.Exit(2)
	}
	h := fakehub.Start()
	defer h.Close()
	r, err := h.AddFolder(*repo, *dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakehub:", err)
		os.Exit(1)
	}
	if *rate > 0 {
		for name := range r.Files {
			if strings.HasSuffix(name, ".safetensors") {
				h.SetFault(name, fakehub.Fault{BytesPerSecond: *rate})
			}
		}
	}
	fmt.Printf("fakehub at %s serving %s\n", h.URL, *repo)
	io.Copy(io.Discard, os.Stdin) // until the test closes it
}
