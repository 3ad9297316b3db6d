package cpu

import "time"

// poolUsage is a snapshot of poolStats, for the benchmarks.
type poolUsage struct {
	Regions    int64
	Wall, Busy time.Duration
}

func (p *pool) usage() poolUsage {
	return poolUsage{Regions: p.stats.regions.Load(), Wall: time.Duration(p.stats.wall.Load()),
		Busy: time.Duration(p.stats.busy.Load())}
}
