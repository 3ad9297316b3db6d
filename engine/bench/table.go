package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
)

// Table writes reports side by side, one column per report: the numbers
// `make bench` prints. Spreads are written "median (min–max)".
func Table(out io.Writer, reports []*Report) error {
	if len(reports) == 0 {
		return nil
	}
	t := &table{reports: reports}
	t.settingRows()
	order := promptSizes(reports)
	t.measuredRows(order)
	t.layerRows(order)
	t.projectedRows(order)
	t.bandwidthRows(order)
	t.counterRows()
	return t.write(out)
}

// table gathers the rows of Table, one cell per report.
type table struct {
	reports []*Report
	rows    [][]string
	// A section's title waits for its first filled row, so that a section
	// with nothing measured (per-layer costs turned off) prints nothing.
	pending string
}

// add appends a row whose cells cell gives, one per report, if any of them
// is filled; an empty cell prints as "–".
func (t *table) add(label string, cell func(r *Report) string) {
	row := []string{label}
	filled := false
	for _, r := range t.reports {
		c := cell(r)
		if c != "" {
			filled = true
		} else {
			c = "–"
		}
		row = append(row, c)
	}
	if filled {
		if t.pending != "" {
			t.rows = append(t.rows, []string{t.pending})
			t.pending = ""
		}
		t.rows = append(t.rows, row)
	}
}

func (t *table) section(title string) { t.pending = title }

// settingRows are the rows that say what was measured, and how.
func (t *table) settingRows() {
	add := t.add
	add("backend", func(r *Report) string { return r.Backend })
	add("model", func(r *Report) string {
		return fmt.Sprintf("%d layers (%d DeltaNet, %d attention), hidden %d, %d experts, %s",
			r.Model.Layers, r.Model.DeltaNetLayers, r.Model.AttentionLayers, r.Model.Hidden, r.Model.Experts, bitsLabel(r.Model.Bits))
	})
	add("runs", func(r *Report) string {
		s := r.Settings
		if s.LongRuns > 0 && s.LongRuns != s.Runs {
			return fmt.Sprintf("%d (%d for prompts over %d)", s.Runs, s.LongRuns, s.LongPrompt)
		}
		return fmt.Sprint(s.Runs)
	})
	add("prefill chunk, tokens", func(r *Report) string {
		if r.Settings.Chunk <= 0 {
			return "whole prompt"
		}
		return fmt.Sprint(r.Settings.Chunk)
	})
	add("wall time of the benchmark", func(r *Report) string { return fmt.Sprintf("%.0f s", r.Seconds) })
	add("load average (1 min) at start / end", func(r *Report) string {
		return fmt.Sprintf("%.2f / %.2f on %d cores", r.Machine.LoadStart[0], r.Machine.LoadEnd[0], r.Machine.Cores)
	})
}

// promptSizes are the prompt lengths any report prefilled, in the order
// they first appear.
func promptSizes(reports []*Report) []int {
	prompts := map[int]bool{}
	var order []int
	for _, r := range reports {
		for _, p := range r.Prefill {
			if !prompts[p.Tokens] {
				prompts[p.Tokens] = true
				order = append(order, p.Tokens)
			}
		}
	}
	return order
}

func (t *table) measuredRows(order []int) {
	add := t.add
	t.section("measured")
	for _, n := range order {
		add(fmt.Sprintf("prefill %d: time to first token, s", n), func(r *Report) string {
			if p := r.prefill(n); p != nil {
				return spread(p.TTFT, 2)
			}
			return ""
		})
		add(fmt.Sprintf("prefill %d: tok/s", n), func(r *Report) string {
			if p := r.prefill(n); p != nil {
				return spread(p.TokPerSec, 1)
			}
			return ""
		})
		add(fmt.Sprintf("prefill %d: process CPU time, s", n), func(r *Report) string {
			if p := r.prefill(n); p != nil && p.CPUSeconds.Max > 0 {
				return spread(p.CPUSeconds, 2)
			}
			return ""
		})
	}
	for _, n := range order {
		add(fmt.Sprintf("decode after %d: tok/s", n), func(r *Report) string {
			if d := r.decode(n); d != nil {
				return spread(d.TokPerSec, 2) + fmt.Sprintf(" over %d tokens", d.Tokens)
			}
			return ""
		})
		add(fmt.Sprintf("decode after %d: process CPU time, ms/token", n), func(r *Report) string {
			if d := r.decode(n); d != nil && d.CPUSeconds.Max > 0 && d.Tokens > 0 {
				k := 1e3 / float64(d.Tokens)
				c := d.CPUSeconds
				return spread(Stat{Median: c.Median * k, Min: c.Min * k, Max: c.Max * k, N: c.N}, 1)
			}
			return ""
		})
	}
	add("peak resident memory", func(r *Report) string { return gib(r.PeakRSS) })
}

func (t *table) layerRows(order []int) {
	add := t.add
	t.section("per layer (median; each layer includes its MoE)")
	for _, n := range order {
		add(fmt.Sprintf("prefill %d: DeltaNet / attention layer, fixed, ms", n), func(r *Report) string {
			if p := r.prefill(n); p != nil && p.Layers != nil {
				return layerCells(p.Layers)
			}
			return ""
		})
	}
	for _, n := range order {
		// Per prompt token, so that lengths compare: flat for the blocks
		// whose work is linear in the prompt, growing for attention.
		add(fmt.Sprintf("prefill %d: DeltaNet mixer / MoE / attention mixer, µs per token", n), func(r *Report) string {
			if p := r.prefill(n); p != nil && p.Layers != nil && p.Layers.Method == "blocks" && n > 0 {
				c, k := p.Layers, 1e3/float64(n)
				return fmt.Sprintf("%s / %s / %s", ms((c.DeltaNetLayerMs-c.MoEMs)*k), ms(c.MoEMs*k), ms((c.AttentionLayerMs-c.MoEMs)*k))
			}
			return ""
		})
	}
	for _, n := range order {
		add(fmt.Sprintf("decode after %d: DeltaNet / attention layer, fixed, ms/token", n), func(r *Report) string {
			if d := r.decode(n); d != nil && d.Layers != nil {
				return layerCells(d.Layers)
			}
			return ""
		})
	}
}

func (t *table) projectedRows(order []int) {
	add := t.add
	t.section(fmt.Sprintf("projected to 40 layers (%d DeltaNet + %d attention)", TargetDeltaNetLayers, TargetAttentionLayers))
	for _, n := range order {
		add(fmt.Sprintf("prefill %d: time to first token, s", n), func(r *Report) string {
			if p := r.prefill(n); p != nil && p.Layers != nil {
				return fmt.Sprintf("%.1f", p.Layers.Projected40Ms/1e3)
			}
			return ""
		})
		add(fmt.Sprintf("prefill %d: tok/s", n), func(r *Report) string {
			if p := r.prefill(n); p != nil && p.Layers != nil {
				return fmt.Sprintf("%.2f", p.Layers.ProjectedTokPerSec)
			}
			return ""
		})
	}
	for _, n := range order {
		add(fmt.Sprintf("decode after %d: tok/s", n), func(r *Report) string {
			if d := r.decode(n); d != nil && d.Layers != nil {
				return fmt.Sprintf("%.3f", d.Layers.ProjectedTokPerSec)
			}
			return ""
		})
	}
}

func (t *table) bandwidthRows(order []int) {
	add := t.add
	t.section("memory bandwidth")
	add("copy probe, GB/s (read+write)", func(r *Report) string {
		if r.Bandwidth.Copies == 0 {
			return ""
		}
		return fmt.Sprintf("%.1f best, %s (%s, %d MiB)", r.Bandwidth.GBps, spread(r.Bandwidth.Copy, 1), r.Bandwidth.Method, r.Bandwidth.Bytes>>20)
	})
	add("device copy probe, GB/s (read+write)", func(r *Report) string {
		b := r.DeviceBandwidth
		if b == nil {
			return ""
		}
		return fmt.Sprintf("%.1f best, %s (%s, %d MiB)", b.GBps, spread(b.Copy, 1), b.Method, b.Bytes>>20)
	})
	for _, n := range order {
		add(fmt.Sprintf("decode after %d: bytes/token, GB/s, fraction of copy", n), func(r *Report) string {
			if d := r.decode(n); d != nil {
				return fmt.Sprintf("%s, %.2f GB/s, %.1f%%", mib(d.Traffic.TotalBytes), d.AchievedGBps, 100*d.BandwidthFraction)
			}
			return ""
		})
	}
}

func (t *table) counterRows() {
	add := t.add
	var counterNames []string
	seen := map[string]bool{}
	for _, r := range t.reports {
		for _, c := range r.Counters {
			k := c.Phase + ": " + c.Name
			if !seen[k] {
				seen[k] = true
				counterNames = append(counterNames, k)
			}
		}
	}
	if len(counterNames) > 0 {
		t.section("GPU counters (per decode token, per prefill chunk)")
		for _, k := range counterNames {
			add(k, func(r *Report) string {
				for _, c := range r.Counters {
					if c.Phase+": "+c.Name == k {
						if strings.HasSuffix(c.Name, "bytes per token") {
							return mib(int64(math.Round(c.Value)))
						}
						return trimFloat(c.Value)
					}
				}
				return ""
			})
		}
	}
}

// write prints the rows aligned, then each report's notes.
func (t *table) write(out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	for _, row := range t.rows {
		if len(row) == 1 {
			fmt.Fprintf(tw, "%s\n", strings.ToUpper(row[0][:1])+row[0][1:])
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\n", row[0], strings.Join(row[1:], "\t"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range t.reports {
		for _, n := range r.Notes {
			fmt.Fprintf(out, "note (%s): %s\n", r.Kind, n)
		}
	}
	return nil
}

func (r *Report) prefill(n int) *PrefillResult {
	for i := range r.Prefill {
		if r.Prefill[i].Tokens == n {
			return &r.Prefill[i]
		}
	}
	return nil
}

func (r *Report) decode(n int) *DecodeResult {
	for i := range r.Decode {
		if r.Decode[i].Context == n {
			return &r.Decode[i]
		}
	}
	return nil
}

func layerCells(c *LayerCosts) string {
	return fmt.Sprintf("%s / %s, %s (%s)", ms(c.DeltaNetLayerMs), ms(c.AttentionLayerMs), ms(c.FixedMs), c.Method)
}

// spread writes a Stat as "median (min–max)", or the value alone for one run.
func spread(s Stat, digits int) string {
	if s.N == 0 || math.IsNaN(s.Median) {
		return ""
	}
	f := "%." + fmt.Sprint(digits) + "f"
	if s.N == 1 {
		return fmt.Sprintf(f+" (1 run)", s.Median)
	}
	return fmt.Sprintf(f+" ("+f+"–"+f+")", s.Median, s.Min, s.Max)
}

func ms(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	}
	return fmt.Sprintf("%.3f", v)
}

func gib(b int64) string {
	if b <= 0 {
		return ""
	}
	return fmt.Sprintf("%.2f GiB", float64(b)/(1<<30))
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func bitsLabel(bits int) string {
	if bits == 0 {
		return "float weights"
	}
	return fmt.Sprintf("%d-bit affine", bits)
}

func trimFloat(v float64) string {
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.2f", v)
}
