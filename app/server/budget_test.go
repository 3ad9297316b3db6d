package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine"
)

// TestRequestMemoryBudget holds most of a small budget (8 MiB) with a body
// that is still arriving, and sends another request whose body would pass
// it: that one is a 429 with Retry-After. Once the first request is done
// its share is given back and the same request is served.
func TestRequestMemoryBudget(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{}), func(c *Config) {
		c.RequestMemory = 8 << 20
	})
	// The first body: 1 MiB sent now (6 MiB reckoned), the rest held back.
	first := `{"messages":[{"role":"user","content":"` + strings.Repeat("a ", 1<<20) + `"}],"max_tokens":1}`
	conn, err := net.Dial("tcp", ts.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ts.Addr(), len(first))
	split := 1 << 20
	if _, err := conn.Write([]byte(first[:split])); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the first body to be read", func() bool { return ts.budget.inUse() >= int64(split)*requestMemoryFactor })

	second := `{"messages":[{"role":"user","content":"` + strings.Repeat("b", 400<<10) + `"}],"max_tokens":1}`
	res := post(t, ts.url+"/v1/chat/completions", second)
	if res.status != http.StatusTooManyRequests || res.header.Get("Retry-After") == "" {
		t.Fatalf("a body past the budget: %d %s, want 429 with Retry-After", res.status, res.body)
	}
	t.Logf("429: %s", path(res.json(t), "error", "message"))

	if _, err := conn.Write([]byte(first[split:])); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	answer, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	answer.Body.Close()
	waitFor(t, 10*time.Second, "the budget to be given back", func() bool { return ts.budget.inUse() == 0 })
	if res := post(t, ts.url+"/v1/chat/completions", second); res.status == http.StatusTooManyRequests {
		t.Fatalf("the budget was not given back: %d %s", res.status, res.body)
	}
}
