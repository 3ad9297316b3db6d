package server

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSlowBodyIsCut sends a body one byte every 100 ms, as a client that
// holds a connection open by trickling: with a grace of 1 s and a minimum
// rate of 1 KiB/s the server answers 408 after about a second and closes
// the connection, long before the body's 30 s would have passed. A body
// sent at once still arrives, and the stream answering it outlives the
// grace (net/http lifts the read deadline once the body is read).
func TestSlowBodyIsCut(t *testing.T) {
	ts := startServer(t, endlessLoader(t, 4), func(c *Config) {
		c.BodyGrace = time.Second
		c.MinBodyRate = 1 << 10
	})
	ts.keepAliveInterval = 100 * time.Millisecond
	body := `{"messages":[{"role":"user","content":"` + strings.Repeat("x", 270) + `"}],"max_tokens":1}`
	conn, err := net.Dial("tcp", ts.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", ts.Addr(), len(body))
	start := time.Now()
	go func() {
		for i := range len(body) {
			if _, err := conn.Write([]byte{body[i]}); err != nil {
				return
			}
			time.Sleep(100 * time.Millisecond) // a client that trickles its body: the case under test
		}
	}()
	// Bounded generously (the machine may be loaded): 10 s is a third of
	// the 30 s the whole body takes.
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a trickled body after %v: %v", time.Since(start), err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("status %d after %v, want 408", res.StatusCode, time.Since(start))
	}
	t.Logf("trickled body cut after %v", time.Since(start))

	// A body sent whole, answered by a stream that runs past the grace.
	req := `{"messages":[{"role":"user","content":"` + strings.Repeat("y ", 100) + `"}],"max_tokens":20000,"stream":true}`
	stream, err := http.Post(ts.url+"/v1/chat/completions", "application/json", strings.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("a body sent at once: %d", stream.StatusCode)
	}
	read := bufio.NewReader(stream.Body)
	until := time.Now().Add(2 * time.Second)
	for time.Now().Before(until) {
		if _, err := read.ReadString('\n'); err != nil {
			t.Fatalf("the stream ended after %v, within the body's grace: %v", time.Since(start), err)
		}
	}
}
