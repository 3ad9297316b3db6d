package bench

import "testing"

// TestMetalTarget measures the GPU backend on the Mac's GPU over the tiny
// fixture: the counters must keep the pipeline's rules and the device copy
// probe must run (and check its copy). Timings are only checked to be
// positive: a CI runner's virtual GPU says nothing about speed.
func TestMetalTarget(t *testing.T) {
	m := tinyModel(t)
	tg, closeFn, err := Open("metal", m, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFn()
	r, err := Run(tg, Settings{Prompts: []int{40}, Gen: 4, Runs: 2, Warmup: 4, CopyBytes: 64 << 20, Copies: 2,
		LayerCosts: "prefixes", PrefixPrompt: 40, PrefixGen: 4}, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkStat(t, "metal prefill tok/s", r.Prefill[0].TokPerSec, 2)
	checkStat(t, "metal decode tok/s", r.Decode[0].TokPerSec, 2)
	checkPipelineCounters(t, r)
	if r.DeviceBandwidth == nil || !(r.DeviceBandwidth.GBps > 0) {
		t.Fatalf("device copy probe %+v (notes %q): want a rate", r.DeviceBandwidth, r.Notes)
	}
	if n := len(r.PrefixTimes["decode"]); n != 4 {
		t.Errorf("%d decode prefix times, want 4", n)
	}
	t.Logf("%s: prefill 40 %.1f tok/s, decode %.1f tok/s, device copy %.1f GB/s",
		r.Backend, r.Prefill[0].TokPerSec.Median, r.Decode[0].TokPerSec.Median, r.DeviceBandwidth.GBps)
}
