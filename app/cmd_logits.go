package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/engine/backends"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/logits"
	"github.com/suzuran-app/suzuran/engine/model"
)

func newLogitsCmd() *cobra.Command {
	var (
		dir, ids, backend, out string
		precision, pixelValues string
		images                 []string
		gen, threads           int
		stats                  bool
	)
	cmd := &cobra.Command{
		Use:   "logits [--model DIR] --ids 1,2,3 [--image FILE… [--pixel-values REF.safetensors]] [--gen N] [--backend cpu|emu] [--stats] --out FILE",
		Short: "Write a prompt's logits (and a greedy continuation) as safetensors, to check an engine against a reference",
		Long: `logits runs the prompt given as token ids through the model in one pass and
writes prompt_logits F32 [T,V]; with --gen N it also decodes N tokens greedily
through the cache and writes gen_ids I32 [N] and gen_logits F32 [N,V], the
logits that chose each token. The layout is that of the reference fixtures.

With --image, the ids hold each image's expanded tokens as transformers
gives them (<|vision_start|>, one <|image_pad|> per merged patch,
<|vision_end|>); the k-th image fills the k-th run of pads. --pixel-values
takes the k-th image's pixels from REF's tensors named after its file
(image2.png: image2.pixel_values and image2.grid_thw) instead of the
image processor; without it the checkpoint's own processor reads the files
at its preprocessor_config.json's limits, as the reference does. OUT then also holds image{k}.pixel_values and
image{k}.grid_thw as the engine used them (k in prompt order, from 0),
image_embeds and position_ids.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt, err := parseIDs(ids)
			if err != nil {
				return err
			}
			if err := checkThreads(threads); err != nil {
				return err
			}
			if !slices.Contains(backends.Names(), backend) {
				return fmt.Errorf("unknown backend %q: choose one of %s", backend, strings.Join(backends.Names(), ", "))
			}
			if err := checkPrecision(cmd, backend, precision); err != nil {
				return err
			}
			modelDir, err := commandModel(cmd, dir)
			if err != nil {
				return err
			}
			m, err := checkpoint.Load(modelDir)
			if err != nil {
				return err
			}
			defer m.Close()
			ims, err := logitsImages(images, pixelValues, modelDir)
			if err != nil {
				return err
			}
			var vw *model.VisionWeights
			if len(ims) > 0 {
				if vw, err = m.Vision(); err != nil {
					return err
				}
			}
			// An f32 KV cache on the GPU backends, so that their logits can
			// be held to f32 tolerances against the reference.
			b, err := backends.Open(backend, m.Weights, backends.Options{Threads: threads, KVCacheF32: true, Precision: cpu.Precision(precision)})
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := logits.ComputeImages(b.Backend, m.Weights, vw, prompt, ims, gen)
			if err != nil {
				return err
			}
			if err := res.Write(out); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %d prompt tokens in %v, %d generated in %v on %s\n",
				out, len(prompt), res.PrefillTime.Round(1e6), len(res.GenIDs), res.DecodeTime.Round(1e6), b.Name())
			if b.GPU != nil && stats && err == nil {
				for _, line := range b.GPU.StatsLines() {
					fmt.Fprintln(cmd.ErrOrStderr(), line)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "model", "", "model folder (config.json and safetensors weights; default: the configured model, else the demo model)")
	f.StringVar(&ids, "ids", "", "prompt token ids, comma-separated")
	f.IntVar(&gen, "gen", 0, "tokens to generate greedily after the prompt")
	f.StringVar(&backend, "backend", "cpu", "backend to run on")
	f.IntVar(&threads, "threads", 0, "CPU threads (0: all cores)")
	addPrecisionFlag(cmd, &precision)
	f.StringVar(&out, "out", "", "safetensors file to write")
	f.StringSliceVar(&images, "image", nil, "image files, in prompt order (repeat the flag or separate with commas)")
	f.StringVar(&pixelValues, "pixel-values", "", "safetensors file holding each image's NAME.pixel_values and NAME.grid_thw (NAME: the image file's name without extension)")
	f.BoolVar(&stats, "stats", false, "print the GPU backend's per-step counters to stderr")
	for _, name := range []string{"ids", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// parseIDs reads "1,2,3" (spaces allowed) into token ids.
func parseIDs(s string) ([]int, error) {
	var ids []int
	for _, field := range strings.Split(s, ",") {
		field = strings.TrimSpace(field)
		if field == "" && strings.TrimSpace(s) == "" {
			break
		}
		if field == "" {
			return nil, fmt.Errorf("--ids %q: an empty entry between commas; give ids like 1,2,3", s)
		}
		id, err := strconv.Atoi(field)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--ids: %q is not a token id (a non-negative integer)", field)
		}
		ids = append(ids, id)
	}
	if len(ids) == 0 {
		return nil, fmt.Errorf("--ids: no token ids given")
	}
	return ids, nil
}
