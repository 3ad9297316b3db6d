package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/suzuran-app/suzuran/engine"
)

// maxRSS is a finished process's peak resident memory in bytes.
func maxRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" {
		return ru.Maxrss // bytes on macOS, kilobytes on Linux
	}
	return ru.Maxrss << 10
}

// selfRSS is this process's peak resident memory so far, in bytes.
func selfRSS() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	if runtime.GOOS == "darwin" {
		return ru.Maxrss
	}
	return ru.Maxrss << 10
}

// TestLongPromptMemory sends prompts far too long for the context to a
// server in a child process (this test binary again, serving the fixture
// with a 262,144-token context and 192 MiB for requests in flight) and
// reads the child's peak RSS when it exits: a 30 MB message (refused from
// its length before it is rendered) and a 12 MB one (short enough in bytes
// to be rendered, refused while it is tokenized, at the context's 262,144
// tokens), one after the other, then two of each at once. Each is a 400
// saying the context is exceeded, or, at once, a 429 when the others hold
// the budget; the child's peak stays under 320 MB above its idle size
// (measured: 150 MB for the two in turn, 215 MB with those at once). Before the prompt was checked on the way, one
// 30 MB prompt peaked at 1.5 GB, and four at once were not bounded at all.
func TestLongPromptMemory(t *testing.T) {
	if os.Getenv("SUZURAN_PROMPT_CHILD") == "1" {
		servePromptChild(t)
		return
	}
	if testing.Short() {
		t.Skip("sends 80 MB of prompts to a child process")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestLongPromptMemory$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SUZURAN_PROMPT_CHILD=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	var addr string
	var idle int64
	lines := bufio.NewScanner(stdout)
	for addr == "" && lines.Scan() {
		if f := strings.Fields(lines.Text()); len(f) == 3 && f[0] == "LISTENING" {
			addr = f[1]
			idle, _ = strconv.ParseInt(f[2], 10, 64)
		}
	}
	if addr == "" {
		t.Fatal("the child did not start its server")
	}
	go io.Copy(io.Discard, stdout)

	body := func(text string) []byte {
		b, _ := json.Marshal(map[string]any{"messages": []any{map[string]any{"role": "user", "content": text}}, "max_tokens": 1})
		return b
	}
	long := body(strings.Repeat("a", 30<<20))
	words := body(strings.Repeat("hello world ", 12<<20/12))
	client := &http.Client{Timeout: 5 * time.Minute}
	send := func(b []byte, concurrent bool) error {
		res, err := client.Post("http://"+addr+"/v1/chat/completions", "application/json", bytes.NewReader(b))
		if err != nil {
			return err
		}
		defer res.Body.Close()
		answer, _ := io.ReadAll(res.Body)
		if res.StatusCode == 429 && concurrent {
			return nil
		}
		if res.StatusCode != 400 || !bytes.Contains(answer, []byte("context_length_exceeded")) {
			return fmt.Errorf("%d %.300s, want 400 context_length_exceeded", res.StatusCode, answer)
		}
		return nil
	}
	for _, b := range [][]byte{long, words} {
		if err := send(b, false); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 4)
	for _, b := range [][]byte{long, long, words, words} {
		go func() { errs <- send(b, true) }()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the child failed: %v", err)
	}
	peak := maxRSS(cmd.ProcessState)
	t.Logf("child: idle %d MB, peak %d MB (%d MB above idle)", idle>>20, peak>>20, (peak-idle)>>20)
	if raceEnabled {
		t.Log("not bounded under the race detector, whose shadow memory multiplies the resident size")
		return
	}
	if peak-idle > 320<<20 {
		t.Errorf("peak RSS %d MB above idle for prompts too long, want under 320 MB", (peak-idle)>>20)
	}
}

// servePromptChild serves the fixture until its stdin closes, telling its
// address and idle peak RSS on stdout.
func servePromptChild(t *testing.T) {
	ts := startServer(t, loadModel(t, fixtureDir, engine.LoadOptions{ContextTokens: 262_144}), func(c *Config) {
		c.RequestMemory = 192 << 20
	})
	fmt.Printf("LISTENING %s %d\n", ts.Addr(), selfRSS())
	io.Copy(io.Discard, os.Stdin)
}
