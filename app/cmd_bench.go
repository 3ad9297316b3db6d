package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine/bench"
	"github.com/suzuran-app/suzuran/engine/checkpoint"
	"github.com/suzuran-app/suzuran/engine/cpu"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// benchOptions are bench's flags.
type benchOptions struct {
	s                         bench.Settings
	syn                       bench.Synthetic
	dir, backend, layout, out string
	precision, isa            string
	synthetic, asJSON, table  bool
	listBackends              bool
	threads, copyMiB          int
	par                       bench.ParallelSettings
	vis                       bench.VisionSettings
}

func newBenchCmd() *cobra.Command {
	o := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [--model DIR | --synthetic] [--backend " + strings.Join(bench.Kinds(), "|") + "] [--prompt 512,4096] [--gen 128] [--runs N] [--json]",
		Short: "Measure prefill and decode speed, memory and bandwidth use on a model folder or a synthetic full-width checkpoint",
		Long: `bench measures, after a warm-up, the time to first token and prefill tokens/s
for each prompt length, decode tokens/s after each prompt, each as the median
(min–max) of --runs runs; the peak resident memory; the memory bandwidth of a
large copy and the fraction of it decode achieves; per-layer costs with the
figures projected to the full model's 40 layers; and, for GPU backends, the
per-step counters.

--synthetic builds (once, cached by config, layers, layout and seed under the
user cache folder) a checkpoint with the full model's width and vocabulary,
random weights and --layers layers, and measures that; make bench uses it.
Without --model or --synthetic, bench measures the configured model, else the
demo model Suzuran Tiny, as every command with --model does.

--table FILE... prints saved --out reports side by side without running.

--parallel 1,2,4 measures batched decode instead: for each count, that many
sequences (prompts of --parallel-prompt tokens, different for each) decode
together, one batched pass per step, and the aggregate and per-stream
tokens/s are printed.

--image-tokens 1024 measures the vision tower instead: a synthetic tower of
the model's vision_config shapes (random bf16 weights) encoding one image of
that many tokens; --image-follow-up then asks about it through the engine and
asks a follow-up question, and --image-plan-only (GPU backends) reports the
counters of the tower's command buffer without running it.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if o.table {
				if len(args) == 0 {
					return errors.New("--table needs the report files (written with --out) to show")
				}
				return nil
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: o.run,
	}
	o.addFlags(cmd)
	return cmd
}

func (o *benchOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.dir, "model", "", "model folder to measure (default: the configured model, else the demo model)")
	f.BoolVar(&o.synthetic, "synthetic", false, "measure a synthetic full-width checkpoint, built once and cached")
	f.StringVar(&o.syn.ConfigPath, "config", "", "config.json the synthetic checkpoint imitates (default: mlx-community/Qwen3.6-35B-A3B-4bit's, built in)")
	f.IntVar(&o.syn.Layers, "layers", 4, "layers of the synthetic checkpoint (4: three DeltaNet, one attention)")
	f.StringVar(&o.layout, "layout", "mlx", "layout of the synthetic checkpoint: mlx (4-bit affine) or hub (bf16)")
	f.Uint64Var(&o.syn.Seed, "seed", 1, "seed of the synthetic weights")
	f.StringVar(&o.syn.CacheDir, "cache", "", "folder for synthetic checkpoints (default: the user cache folder's suzuran/synthetic)")
	f.StringVar(&o.backend, "backend", "cpu", "backend to measure: "+strings.Join(bench.Kinds(), ", "))
	f.IntSliceVar(&o.s.Prompts, "prompt", []int{512, 4096}, "prompt lengths to prefill, comma-separated")
	f.IntVar(&o.s.Gen, "gen", 128, "decode steps after each prompt")
	f.IntVar(&o.s.Runs, "runs", 3, "runs per prompt length (median, min and max are reported)")
	f.IntVar(&o.s.LongRuns, "long-runs", 0, "runs for prompts over --long-prompt tokens (0: --runs)")
	f.IntVar(&o.s.LongPrompt, "long-prompt", 1024, "prompt length above which --long-runs applies")
	f.IntVar(&o.s.Chunk, "chunk", 512, "prefill chunk length, as the engine prefills (0: the whole prompt in one pass)")
	f.IntVar(&o.s.Warmup, "warmup", 32, "prompt length of the untimed warm-up")
	f.StringVar(&o.s.LayerCosts, "layer-costs", "", "per-layer method: blocks, prefixes or off (default: blocks for cpu, prefixes for GPU backends)")
	f.IntVar(&o.s.PrefixPrompt, "prefix-prompt", 512, "prompt length of the per-layer prefix runs (prefixes method)")
	f.IntVar(&o.s.PrefixGen, "prefix-gen", 16, "decode steps of the per-layer prefix runs (prefixes method)")
	f.IntVar(&o.threads, "threads", 0, "CPU threads for the cpu backend and the copy probe (0: all cores)")
	addPrecisionFlag(cmd, &o.precision)
	f.StringVar(&o.isa, "isa", "", "cpu backend instruction set, to measure a fallback: "+isaChoices()+" (default: the best this machine runs)")
	f.IntSliceVar(&o.par.Streams, "parallel", nil, "measure batched decode of this many streams together instead, comma-separated (1,2,4)")
	f.IntVar(&o.par.Prompt, "parallel-prompt", 64, "prompt tokens of each stream with --parallel")
	f.IntVar(&o.vis.Tokens, "image-tokens", 0, "measure the vision tower instead: a synthetic tower of the model's vision_config shapes encoding one image of this many tokens (1024: 64 × 64 patches)")
	f.IntVar(&o.vis.Depth, "image-depth", 0, "blocks of the synthetic tower with --image-tokens (0: the config's)")
	f.IntVar(&o.vis.Runs, "image-runs", 1, "encodes timed with --image-tokens")
	f.BoolVar(&o.vis.FollowUp, "image-follow-up", false, "with --image-tokens, also ask about the image through the engine and then ask a follow-up question, reporting what each encoded and prefilled")
	f.BoolVar(&o.vis.PlanOnly, "image-plan-only", false, "with --image-tokens on a GPU backend, record the tower's command buffer without running it and report its counters")
	f.IntVar(&o.copyMiB, "copy-mib", 1024, "size of the bandwidth probe's buffer, MiB")
	f.BoolVar(&o.asJSON, "json", false, "print the report as JSON instead of a table")
	f.StringVar(&o.out, "out", "", "also write the JSON report to this file")
	f.BoolVar(&o.table, "table", false, "print saved reports (the arguments) side by side and exit")
	f.BoolVar(&o.listBackends, "list-backends", false, "print the backends this build can measure, one a line, and exit")
}

func (o *benchOptions) run(cmd *cobra.Command, args []string) error {
	if o.table {
		return printSavedReports(cmd, args)
	}
	if o.listBackends {
		_, err := fmt.Fprintln(cmd.OutOrStdout(), strings.Join(bench.Kinds(), "\n"))
		return err
	}
	if err := o.check(cmd); err != nil {
		return err
	}
	dir, err := o.modelFolder(cmd)
	if err != nil {
		return err
	}
	m, err := checkpoint.Load(dir)
	if err != nil {
		return err
	}
	defer m.Close()
	oo := bench.OpenOptions{Threads: o.threads}
	if o.backend == "cpu" {
		oo.Precision, oo.ISA = cpu.Precision(o.precision), cpu.ISA(o.isa)
	}
	t, closeBackend, err := bench.OpenWith(o.backend, m, oo)
	if err != nil {
		return err
	}
	defer closeBackend()
	t.Model.Synthetic = o.synthetic
	if o.vis.Tokens > 0 {
		return benchVision(cmd, t, o.vis, o.asJSON)
	}
	if len(o.par.Streams) > 0 {
		return o.runParallel(cmd, dir, t)
	}
	o.s.CopyBytes = int64(o.copyMiB) << 20
	o.s.Threads = o.threads
	rep, err := bench.Run(t, o.s, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if o.out != "" {
		if err := writeReport(o.out, rep); err != nil {
			return err
		}
	}
	if o.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return bench.Table(cmd.OutOrStdout(), []*bench.Report{rep})
}

// check refuses flags that do not go together.
func (o *benchOptions) check(cmd *cobra.Command) error {
	if err := checkBenchSettings(&o.s, o.threads); err != nil {
		return err
	}
	if err := checkPrecision(cmd, o.backend, o.precision); err != nil {
		return err
	}
	if o.isa != "" && o.backend != "cpu" {
		return fmt.Errorf("--isa %s: only the cpu backend has a choice of instruction set; drop the flag for --backend %s", o.isa, o.backend)
	}
	if o.dir != "" && o.synthetic {
		return errors.New("give either --model DIR or --synthetic, not both")
	}
	return nil
}

// modelFolder is the folder to measure: the synthetic checkpoint's (built
// if it is not cached yet), or --model's.
func (o *benchOptions) modelFolder(cmd *cobra.Command) (string, error) {
	if !o.synthetic {
		// Like every command with --model: the configured model, else
		// the demo model, when none is given.
		return commandModel(cmd, o.dir)
	}
	switch o.layout {
	case "mlx":
		o.syn.Layout = checkpoint.MLX
	case "hub":
		o.syn.Layout = checkpoint.Hub
	default:
		return "", fmt.Errorf("--layout %q: choose mlx or hub", o.layout)
	}
	dir, _, err := bench.EnsureSynthetic(o.syn, cmd.ErrOrStderr())
	return dir, err
}

// runParallel measures batched decode of --parallel streams.
func (o *benchOptions) runParallel(cmd *cobra.Command, dir string, t bench.Target) error {
	o.par.Gen = o.s.Gen
	rs, err := bench.RunParallel(t, o.par, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if o.asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"model": dir, "backend": t.Backend.Name(), "settings": o.par, "parallel": rs})
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s on %s, %d prompt tokens per stream, %d steps\n", dir, t.Backend.Name(), o.par.Prompt, o.par.Gen)
	return bench.ParallelTable(cmd.OutOrStdout(), rs)
}

func writeReport(path string, r *bench.Report) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

func printSavedReports(cmd *cobra.Command, files []string) error {
	var reports []*bench.Report
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var r bench.Report
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: not a bench report: %w", f, err)
		}
		if r.Kind == "" || r.Backend == "" {
			return fmt.Errorf("%s: not a bench report (it names no backend); write one with suzuran bench --out", f)
		}
		reports = append(reports, &r)
	}
	return bench.Table(cmd.OutOrStdout(), reports)
}

// checkBenchSettings refuses flag values that bench.Run would otherwise
// replace with its defaults: a value the user typed is never ignored.
func checkBenchSettings(s *bench.Settings, threads int) error {
	if err := checkThreads(threads); err != nil {
		return err
	}
	for _, c := range []struct {
		flag string
		n    int
	}{{"runs", s.Runs}, {"gen", s.Gen}, {"warmup", s.Warmup}, {"long-prompt", s.LongPrompt},
		{"prefix-prompt", s.PrefixPrompt}, {"prefix-gen", s.PrefixGen}} {
		if err := checkPositive(c.flag, c.n); err != nil {
			return err
		}
	}
	if s.LongRuns < 0 {
		return fmt.Errorf("--long-runs %d: give a positive count, or 0 to use --runs", s.LongRuns)
	}
	if s.Chunk < 0 {
		return fmt.Errorf("--chunk %d: give a positive length, or 0 for the whole prompt in one pass", s.Chunk)
	}
	for _, p := range s.Prompts {
		if err := checkPositive("prompt", p); err != nil {
			return err
		}
	}
	switch s.LayerCosts {
	case "", "blocks", "prefixes", "off":
	default:
		return fmt.Errorf("--layer-costs %q: choose blocks, prefixes or off", s.LayerCosts)
	}
	return nil
}

// benchVision runs the vision tower's benchmark; the follow-up's answers
// are decoded with the demo model's tokenizer (ids beyond it are skipped).
func benchVision(cmd *cobra.Command, t bench.Target, vis bench.VisionSettings, asJSON bool) error {
	if vis.Runs <= 0 {
		return fmt.Errorf("--image-runs %d: give a positive count", vis.Runs)
	}
	if vis.Depth < 0 {
		return fmt.Errorf("--image-depth %d: give a positive count, or 0 for the config's", vis.Depth)
	}
	var tok *tokenizer.Tokenizer
	if vis.FollowUp {
		root, err := models.DefaultRoot()
		if err != nil {
			return err
		}
		demo, err := models.Install(root)
		if err != nil {
			return err
		}
		if tok, err = tokenizer.Load(demo); err != nil {
			return err
		}
	}
	r, err := bench.RunVision(t, vis, tok, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	if asJSON {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"model": t.Model, "backend": t.Backend.Name(), "vision": r})
	}
	return bench.VisionTable(cmd.OutOrStdout(), t.Kind, r)
}
