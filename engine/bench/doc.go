// Package bench measures the engine the same way every time, on the real
// model's shapes: prefill (time to first token and tokens/s) for the prompt
// lengths asked, decode tokens/s after each prompt, each as the median of
// several runs with its minimum and maximum, with the process's CPU time
// beside the wall time (on a shared machine the two part); peak resident
// memory; the memory bandwidth, measured in the same run with a large copy
// (on the host, and for a GPU target also on the device with a copy
// kernel), and the fraction of it that decode achieves given the bytes a
// decode step must read; per-layer costs and the figures projected to the
// full model's 40 layers; and, for GPU backends, the per-step counters.
//
// Run takes a loaded model and a backend; the Report it returns is what
// `suzuran bench --json` prints, with the machine, the commit and the
// settings, so that runs can be compared. Table renders reports side by side
// for `make bench`.
//
// Per-layer costs come from one of two methods. A backend that runs each
// block when it is called (cpu) is timed block by block through a wrapper
// around its model.Pass. A backend that only records blocks and runs them at
// Submit (the GPU backends) is timed end to end with the first n layers for
// several n, and a least-squares fit separates the fixed cost (embedding,
// head, sampling, submission) from the cost of a DeltaNet layer and of an
// attention layer. Either way the projection is
//
//	fixed + 30·(DeltaNet layer) + 10·(attention layer)
//
// the layer mix of Qwen3.6-35B-A3B.
package bench
