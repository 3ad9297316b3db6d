package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestServeFlagErrors(t *testing.T) {
	fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--model", fixture, "--addr", "0.0.0.0:0"}, "needs an API key"},
		{[]string{"serve", "--model", fixture, "--addr", "nonsense"}, "use host:port"},
		{[]string{"serve", "--model", fixture, "--backend", "abacus"}, "unknown backend"},
		{[]string{"serve", "--model", fixture, "--ctx", "-4"}, "--ctx -4"},
		{[]string{"serve", "--model", t.TempDir() + "/missing"}, "--model"},
	} {
		_, stderr, err := execute(t, tc.args...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: err %v, stderr %q; want an error saying %q", tc.args, err, stderr, tc.want)
		}
	}
}

// serveProcess is `suzuran serve` running in a child process.
type serveProcess struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex
	logs strings.Builder
	done chan error
}

func (p *serveProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.logs.String()
}

// startServe runs serve with args and waits until it says where it listens.
func startServe(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(append(os.Environ(), suzuranMainEnv+"=1", "XDG_STATE_HOME="+t.TempDir()), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProcess{cmd: cmd, done: make(chan error, 1)}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		listening := regexp.MustCompile(`on http://(\S+)/v1`)
		for sc.Scan() {
			p.mu.Lock()
			p.logs.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		io.Copy(io.Discard, stderr)
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
		}
	})
	select {
	case p.addr = <-found:
	case err := <-p.done:
		t.Fatalf("serve exited before listening: %v\n%s", err, p.log())
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen within 30 s:\n%s", p.log())
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get("http://" + p.addr + "/health")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the model did not load within 30 s:\n%s", p.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return p
}

func TestServeAnswersAndStopsOnSignal(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")
			p := startServe(t, nil, "--model", fixture, "--backend", "cpu", "--log-requests")
			res, err := http.Post("http://"+p.addr+"/v1/chat/completions", "application/json",
				strings.NewReader(`{"messages":[{"role":"user","content":"secret words"}],"max_tokens":3}`))
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				t.Fatalf("status %d", res.StatusCode)
			}
			start := time.Now()
			p.cmd.Process.Signal(sig)
			select {
			case err := <-p.done:
				if err != nil {
					t.Fatalf("serve exited with %v on %v:\n%s", err, sig, p.log())
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("serve still running 5 s after %v", sig)
			}
			t.Logf("stopped %v after the signal", time.Since(start))
			ln, err := net.Listen("tcp", p.addr)
			if err != nil {
				t.Fatalf("port not free after serve ended: %v", err)
			}
			ln.Close()
			logs := p.log()
			for _, want := range []string{`"model":"mlx-4bit"`, "loading the model", `"path":"/v1/chat/completions"`, `"generated_tokens":3`, `"max_tokens":3`, "API server stopped"} {
				if !strings.Contains(logs, want) {
					t.Errorf("the log lacks %s:\n%s", want, logs)
				}
			}
			if strings.Contains(logs, "secret words") {
				t.Errorf("the log holds the request's text:\n%s", logs)
			}
		})
	}
}

func TestServeDefaultsToTheDemoModel(t *testing.T) {
	home := t.TempDir()
	p := startServe(t, []string{"XDG_CONFIG_HOME=" + filepath.Join(home, "config"), "XDG_CACHE_HOME=" + filepath.Join(home, "cache"), "HOME=" + home})
	if !strings.Contains(p.log(), "using the demo model") || !strings.Contains(p.log(), "suzuran-tiny") {
		t.Errorf("serve without --model does not say it serves the demo model:\n%s", p.log())
	}
	// The demo model answers with thinking off by default.
	res, err := http.Post("http://"+p.addr+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"What does json.dumps do?"}],"max_tokens":48,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(body), "Serialize ``obj`` to a JSON formatted ``str``.") || strings.Contains(string(body), "reasoning_content") {
		t.Errorf("the demo model's answer: %s", body)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}
