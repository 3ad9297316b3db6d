package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/gpu"
	"github.com/suzuran-app/suzuran/engine/gpu/emu"
	"github.com/suzuran-app/suzuran/engine/logits"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

func init() { register(newLogitsCmd()) }

// logitsBackends makes the backends `suzuran logits` can run on, by name.
var logitsBackends = map[string]func(w *model.Weights, threads int, precision cpu.Precision) (model.Backend, error){
	"cpu": func(w *model.Weights, threads int, precision cpu.Precision) (model.Backend, error) {
		return cpu.New(w, cpu.Options{Threads: threads, Sampler: sample.New(), Precision: precision})
	},
	// The GPU backend on the host emulator, with an f32 KV cache so that
	// its logits can be held to f32 tolerances against the reference.
	"emu": func(w *model.Weights, threads int, _ cpu.Precision) (model.Backend, error) {
		dev, err := emu.New(emu.Options{Threads: threads})
		if err != nil {
			return nil, err
		}
		b, err := gpu.New(dev, w, gpu.Options{KVCacheF32: true, OwnDevice: true})
		if err != nil {
			dev.Close()
			return nil, err
		}
		return b, nil
	},
}

func newLogitsCmd() *cobra.Command {
	var (
		dir, ids, backend, out string
		precision              string
		gen, threads           int
		stats                  bool
	)
	cmd := &cobra.Command{
		Use:   "logits [--model DIR] --ids 1,2,3 [--gen N] [--backend cpu|emu] [--stats] --out FILE",
		Short: "Write a prompt's logits (and a greedy continuation) as safetensors, to check an engine against a reference",
		Long: `logits runs the prompt given as token ids through the model in one pass and
writes prompt_logits F32 [T,V]; with --gen N it also decodes N tokens greedily
through the cache and writes gen_ids I32 [N] and gen_logits F32 [N,V], the
logits that chose each token. The layout is that of the reference fixtures.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			prompt, err := parseIDs(ids)
			if err != nil {
				return err
			}
			if err := checkThreads(threads); err != nil {
				return err
			}
			newBackend, ok := logitsBackends[backend]
			if !ok {
				return fmt.Errorf("unknown backend %q: choose one of %s", backend, strings.Join(backendNames(), ", "))
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
			b, err := newBackend(m.Weights, threads, cpu.Precision(precision))
			if err != nil {
				return err
			}
			defer b.Close()
			res, err := logits.Compute(b, m.Weights, prompt, gen)
			if err != nil {
				return err
			}
			if err := res.Write(out); err != nil {
				return err
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: %d prompt tokens in %v, %d generated in %v on %s\n",
				out, len(prompt), res.PrefillTime.Round(1e6), len(res.GenIDs), res.DecodeTime.Round(1e6), b.Name())
			if s, ok := b.(interface{ StatsLines() []string }); ok && stats && err == nil {
				for _, line := range s.StatsLines() {
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
	f.BoolVar(&stats, "stats", false, "print the GPU backend's per-step counters to stderr")
	for _, name := range []string{"ids", "out"} {
		_ = cmd.MarkFlagRequired(name)
	}
	return cmd
}

// backendNames lists the backends sorted, so that messages read the same
// every time.
func backendNames() []string {
	return slices.Sorted(maps.Keys(logitsBackends))
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
