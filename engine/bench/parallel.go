package bench

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/suzuran-app/suzuran/engine/model"
)

// ParallelSettings say what RunParallel measures.
type ParallelSettings struct {
	// Streams are the numbers of sequences decoded together (default 1, 2
	// and 4).
	Streams []int `json:"streams"`
	// Prompt is each sequence's prompt length, prefilled untimed; the
	// sequences' prompts differ, so they route to different experts.
	Prompt int `json:"prompt"`
	// Gen is the number of timed batched decode steps (default 32).
	Gen int `json:"gen"`
	// Seed draws the prompts.
	Seed uint64 `json:"seed"`
}

// ParallelResult is the decode speed of one batch size.
type ParallelResult struct {
	Streams int `json:"streams"`
	// StepMs is the wall time of one batched step, which gives every
	// sequence its next token.
	StepMs float64 `json:"step_ms"`
	// StepCPUMs is the process's CPU time per step, all threads: on a
	// shared machine, where wall time says as much about the others' load,
	// it shows the work a step costs.
	StepCPUMs float64 `json:"step_cpu_ms"`
	// Aggregate is the tokens/s of all sequences together, PerStream what
	// each one sees.
	Aggregate float64 `json:"aggregate_tokens_per_second"`
	PerStream float64 `json:"per_stream_tokens_per_second"`
}

// RunParallel measures batched decode: for each batch size, that many
// sequences are prefilled with different prompts, then Gen steps run, each
// one batched pass (model.StartBatch) that samples every sequence's next
// token greedily. A backend without batching runs a pass per sequence, so
// its aggregate stays flat.
func RunParallel(t Target, s ParallelSettings, log io.Writer) ([]ParallelResult, error) {
	if len(s.Streams) == 0 {
		s.Streams = []int{1, 2, 4}
	}
	if s.Prompt <= 0 {
		s.Prompt = 64
	}
	if s.Gen <= 0 {
		s.Gen = 32
	}
	greedy := &model.Sampling{}
	vocab := t.Weights.Embed.Out
	var out []ParallelResult
	for _, n := range s.Streams {
		if n < 1 {
			return nil, fmt.Errorf("%d streams: give a positive count", n)
		}
		fmt.Fprintf(log, "decoding %d stream(s) together: %d prompt tokens each, %d steps\n", n, s.Prompt, s.Gen)
		segs := make([]model.Segment, n)
		for i := range segs {
			seq, err := t.Backend.NewSequence(s.Prompt + s.Gen + 1)
			if err != nil {
				return nil, err
			}
			defer seq.Close()
			if _, err := model.Prefill(t.Backend, t.Weights, seq, promptIDs(s.Prompt, vocab, s.Seed+uint64(i)), 512, model.Input{Sample: greedy}); err != nil {
				return nil, fmt.Errorf("prefill of stream %d: %w", i, err)
			}
			segs[i] = model.Segment{Seq: seq, In: model.Input{Sample: greedy}}
		}
		// One untimed step, so that the batch's buffers exist.
		if _, err := model.RunBatch(t.Backend, t.Weights, segs); err != nil {
			return nil, err
		}
		start, cpuStart := time.Now(), processCPUTime()
		for range s.Gen - 1 {
			if _, err := model.RunBatch(t.Backend, t.Weights, segs); err != nil {
				return nil, err
			}
		}
		elapsed, cpu := time.Since(start), processCPUTime()-cpuStart
		steps := float64(s.Gen - 1)
		r := ParallelResult{Streams: n, StepMs: elapsed.Seconds() * 1000 / steps, StepCPUMs: cpu.Seconds() * 1000 / steps,
			Aggregate: float64(n) * steps / elapsed.Seconds(), PerStream: steps / elapsed.Seconds()}
		out = append(out, r)
	}
	return out, nil
}

// ParallelTable prints RunParallel's results, with each batch size's
// aggregate speed against one stream's.
func ParallelTable(w io.Writer, rs []ParallelResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "streams\tstep ms\tCPU ms/step\taggregate tok/s\tper stream tok/s\tvs 1 stream\t")
	var one float64
	for _, r := range rs {
		if r.Streams == 1 {
			one = r.Aggregate
		}
	}
	for _, r := range rs {
		gain := "-"
		if one > 0 {
			gain = fmt.Sprintf("%.2f×", r.Aggregate/one)
		}
		fmt.Fprintf(tw, "%d\t%.1f\t%.1f\t%.2f\t%.2f\t%s\t\n", r.Streams, r.StepMs, r.StepCPUMs, r.Aggregate, r.PerStream, gain)
	}
	return tw.Flush()
}
