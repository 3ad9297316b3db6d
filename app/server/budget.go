package server

import (
	"fmt"
	"io"
	"net/http"
	"sync"
)

// DefaultRequestMemory bounds what the API's requests being read, decoded,
// rendered and waiting in the queue hold together (Config.RequestMemory):
// four requests at the body limit at once, each reckoned at
// requestMemoryFactor times its body.
const DefaultRequestMemory = 4 * requestMemoryFactor * DefaultMaxBodyBytes

// requestMemoryFactor is what a request holds per byte of its body, at
// most, while it is decoded and its prompt rendered and tokenized: the body,
// the decoded messages, the rendered prompt and the garbage of rendering it.
// Measured: a 30 MB prompt refused for its length peaks at about 5 times
// its size above the idle process, most of it garbage the collector has
// not yet taken back (TestLongPromptMemory).
const requestMemoryFactor = 6

// memoryBudget counts the bytes the requests in flight hold.
type memoryBudget struct {
	mu          sync.Mutex
	limit, used int64
}

// take reserves n bytes, or returns false when they would pass the limit.
func (b *memoryBudget) take(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *memoryBudget) give(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
}

func (b *memoryBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// chargedBody reserves requestMemoryFactor times each byte it reads from
// the budget; the reservation is given back when the request's handler
// returns (release). A body that would pass the budget fails with a 429:
// the client retries once other requests are done.
type chargedBody struct {
	io.ReadCloser
	budget *memoryBudget
	held   int64
}

func (b *chargedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		charge := int64(n) * requestMemoryFactor
		if !b.budget.take(charge) {
			return 0, &apiError{Status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: "rate_limit_exceeded",
				Message: fmt.Sprintf("the server holds %d MiB of other requests, its limit for requests in flight (%d MiB): retry in a moment",
					b.budget.inUse()>>20, b.budget.limit>>20)}
		}
		b.held += charge
	}
	return n, err
}

func (b *chargedBody) release() {
	b.budget.give(b.held)
	b.held = 0
}
