package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
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

	"github.com/suzuran-app/suzuran/frontend"
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
		{[]string{"serve", "--model", fixture, "--pace", "2s"}, "--pace 2s"},
		{[]string{"serve", "--model", fixture, "--threads", "-1"}, "--threads -1"},
		{[]string{"serve", "--model", fixture, "--no-ui", "--db", "x.db"}, "are the chat UI's"},
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

// startServe runs serve on a free port with args and waits until it says
// where it listens.
func startServe(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	return startServeArgs(t, env, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
}

// startServeArgs is startServe with no address of its own.
func startServeArgs(t *testing.T, env []string, args ...string) *serveProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"serve"}, args...)...)
	// The chat UI's database and settings go to a private home unless env
	// says otherwise (later entries win).
	home := t.TempDir()
	cmd.Env = append(append(os.Environ(), suzuranMainEnv+"=1", "XDG_STATE_HOME="+t.TempDir(),
		"XDG_DATA_HOME="+filepath.Join(home, "data"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_CACHE_HOME="+filepath.Join(home, "cache")), env...)
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
		time.Sleep(20 * time.Millisecond) // the model loads in the child process: /health is asked again
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

// serveRequest sends a request to a running serve and returns its status,
// headers and body.
func serveRequest(t *testing.T, method, url, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(data)
}

// TestServeChatUIBesideTheAPI: one serve answers the chat UI's calls and
// events and the API on one port, at once, on one engine; the UI is under
// the API's Host and Origin checks.
func TestServeChatUIBesideTheAPI(t *testing.T) {
	fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "hf-bf16")
	dir := t.TempDir()
	db := filepath.Join(dir, "chat.db")
	// Greedy, the random model's reply to this question is the same every
	// run and long (app/service's crash test relies on it too); the
	// pace keeps it streaming while the API request runs.
	settings := filepath.Join(dir, "settings.json")
	greedy := `{"sampling_preset": "custom", "sampling": {"temperature": 0, "top_p": 1, "top_k": 0, "min_p": 0, "presence_penalty": 0}}`
	if err := os.WriteFile(settings, []byte(greedy), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startServe(t, nil, "--model", fixture, "--backend", "cpu", "--db", db, "--settings", settings, "--pace", "40ms")
	base := "http://" + p.addr
	if !strings.Contains(p.log(), "chat UI at "+base+"/") {
		t.Errorf("serve does not say where the chat UI is:\n%s", p.log())
	}

	checkServedUI(t, base)

	// The UI's event stream, opened before sending.
	events, err := http.Get(base + "/api/events")
	if err != nil {
		t.Fatal(err)
	}
	defer events.Body.Close()
	lines := bufio.NewReader(events.Body)
	conversationID, replyID := sendFromUI(t, base, `[{"text": "Tell me everything", "think": true}]`)
	jsonBody := map[string]string{"Content-Type": "application/json"}
	nextReplyEvent := func() uiReplyEvent { t.Helper(); return nextUIReplyEvent(t, lines, replyID) }
	// The reply streams.
	for ev := nextReplyEvent(); ev.Type != "reply"; ev = nextReplyEvent() {
	}

	// Meanwhile an API request comes to the same port. The engine runs one
	// request at a time, so it waits its turn, which comes once the UI's
	// reply (which would go on and on) is stopped.
	type apiAnswer struct {
		status int
		body   string
	}
	// Streamed, its first chunk (the role) goes out as soon as the engine
	// took it: then it is in the engine's queue.
	res, err := http.Post(base+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"stream":true,"stream_options":{"include_usage":true}}`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	apiLines := bufio.NewReader(res.Body)
	if first, err := apiLines.ReadString('\n'); err != nil || !strings.Contains(first, `"role":"assistant"`) {
		t.Fatalf("the API request's first line: %q, %v", first, err)
	}
	answered := make(chan apiAnswer, 1)
	go func() {
		rest, _ := io.ReadAll(apiLines)
		answered <- apiAnswer{res.StatusCode, string(rest)}
	}()
	conversation := fmt.Sprintf("[%d]", conversationID)
	if status, _, body := serveRequest(t, "POST", base+"/api/call/Stop", conversation, jsonBody); status != 200 {
		t.Fatalf("Stop: %d %s", status, body)
	}
	var final, written string
	for final == "" {
		if ev := nextReplyEvent(); ev.Message != nil && ev.Message.Status != "streaming" {
			final, written = ev.Message.Status, ev.Message.Reasoning+ev.Message.Content
		}
	}
	if final != "stopped" || written == "" {
		t.Fatalf("the UI's reply ended %q with %q written, want some written, then stopped", final, written)
	}
	select {
	case a := <-answered:
		if a.status != 200 || !strings.Contains(a.body, `"completion_tokens":3`) {
			t.Fatalf("the API beside the UI: %d %s", a.status, a.body)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the API request was not answered within 30 s of the UI's reply stopping")
	}
	status, _, body := serveRequest(t, "POST", base+"/api/call/Conversations", `[""]`, jsonBody)
	if status != 200 || strings.Count(body, `"title"`) != 1 {
		t.Errorf("Conversations = %d %s, want the one conversation", status, body)
	}
	if _, err := os.Stat(db); err != nil {
		t.Errorf("the conversation database --db named: %v", err)
	}

	checkUIRefusesForeign(t, base)
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := <-p.done; err != nil {
		t.Errorf("serve exited with %v:\n%s", err, p.log())
	}
}

// checkServedUI checks serve's chat UI at base: the built frontend (or a
// page that says how to build it), and the API shown as this server.
func checkServedUI(t *testing.T, base string) {
	t.Helper()
	// The page: the built frontend, or, in a binary built before it, a
	// page that says how to build it.
	status, _, body := serveRequest(t, "GET", base+"/", "", nil)
	if _, err := frontend.Dist(); err == nil {
		if status != 200 || !strings.Contains(body, "<html") {
			t.Errorf("GET / = %d %.200q, want the chat UI's index.html", status, body)
		}
	} else if status != 404 || !strings.Contains(body, "make build") {
		t.Errorf("GET / without a built frontend = %d %q, want 404 saying how to build it", status, body)
	}

	// The UI shows the API as this server: on, at this address, no switch.
	status, _, body = serveRequest(t, "POST", base+"/api/call/State", "[]", map[string]string{"Content-Type": "application/json"})
	if want := `"api":{"available":false,"enabled":true,"url":"` + base + `","lan":false,"error":""}`; status != 200 || !strings.Contains(body, want) {
		t.Errorf("State = %d %s, want it to hold %s", status, body, want)
	}
}

// sendFromUI sends a message through the UI's Send call and returns the
// conversation's id and the reply's.
func sendFromUI(t *testing.T, base, args string) (conversation, reply int64) {
	t.Helper()
	status, _, body := serveRequest(t, "POST", base+"/api/call/Send", args,
		map[string]string{"Content-Type": "application/json"})
	if status != 200 {
		t.Fatalf("Send: %d %s", status, body)
	}
	var sent struct {
		Result struct {
			Conversation struct {
				ID int64 `json:"id"`
			} `json:"conversation"`
			Reply struct {
				ID int64 `json:"id"`
			} `json:"reply"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &sent); err != nil {
		t.Fatalf("Send: %v in %s", err, body)
	}
	return sent.Result.Conversation.ID, sent.Result.Reply.ID

}

// uiReplyEvent is one event of the UI's stream about a reply.
type uiReplyEvent struct {
	Type      string `json:"type"`
	MessageID int64  `json:"messageId"`
	Message   *struct {
		Status    string `json:"status"`
		Content   string `json:"content"`
		Reasoning string `json:"reasoning"`
	} `json:"message"`
}

// nextUIReplyEvent reads the UI's events up to the next one about reply.
func nextUIReplyEvent(t *testing.T, lines *bufio.Reader, reply int64) uiReplyEvent {
	t.Helper()
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("the UI's event stream: %v", err)
		}
		payload, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok {
			continue
		}
		var ev uiReplyEvent
		json.Unmarshal([]byte(payload), &ev)
		if ev.MessageID == reply {
			return ev
		}
	}
}

// checkUIRefusesForeign: the API's safety rules hold for the UI at base: a
// foreign Host (DNS rebinding) and a foreign page's Origin are refused.
func checkUIRefusesForeign(t *testing.T, base string) {
	t.Helper()
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
	}{
		{"foreign Host, page", "GET", "/", map[string]string{"Host": "evil.example:80"}},
		{"foreign Host, call", "POST", "/api/call/State", map[string]string{"Host": "evil.example", "Content-Type": "application/json"}},
		{"foreign Host, events", "GET", "/api/events", map[string]string{"Host": "evil.example"}},
		{"foreign Origin, call", "POST", "/api/call/State", map[string]string{"Origin": "http://evil.example", "Content-Type": "application/json"}},
	} {
		status, _, body := serveRequest(t, tc.method, base+tc.path, "[]", tc.header)
		if status != http.StatusForbidden {
			t.Errorf("%s: %d %s, want 403", tc.name, status, body)
		}
	}
}

// TestServeExposedUIWantsTheKey: bound beyond loopback, the chat UI asks
// for the API key like the API does (a browser as a password).
func TestServeExposedUIWantsTheKey(t *testing.T) {
	fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")
	p := startServe(t, nil, "--model", fixture, "--backend", "cpu", "--addr", "0.0.0.0:0", "--api-key", "sesame")
	_, port, _ := net.SplitHostPort(p.addr)
	base := "http://127.0.0.1:" + port
	jsonBody := map[string]string{"Content-Type": "application/json"}
	for _, tc := range []struct {
		name, method, path string
		header             map[string]string
		want               int
	}{
		{"call without the key", "POST", "/api/call/State", jsonBody, 401},
		{"call with the key", "POST", "/api/call/State", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer sesame"}, 200},
		{"call with a wrong key", "POST", "/api/call/State", map[string]string{"Content-Type": "application/json", "Authorization": "Bearer nope"}, 401},
		{"events without the key", "GET", "/api/events", nil, 401},
		{"page without the key", "GET", "/", nil, 401},
		{"API without the key", "POST", "/v1/chat/completions", jsonBody, 401},
	} {
		status, header, body := serveRequest(t, tc.method, base+tc.path, "[]", tc.header)
		if status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, status, body, tc.want)
		}
		if status == 401 && tc.path == "/" && header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate: a browser cannot ask for the key", tc.name)
		}
	}
	// A browser sends the key as the password of basic authentication.
	req, _ := http.NewRequest("GET", base+"/api/events", nil)
	req.SetBasicAuth("", "sesame")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("events with the key as a password: %d", res.StatusCode)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// TestServeKeyAndOriginsOnLoopback: on loopback with --api-key and --cors,
// the chat UI's calls and events need the key as the API does; an origin
// allowed for the API gets nothing from them; and no call may name a file
// on the disk (a browser uploads content instead).
func TestServeKeyAndOriginsOnLoopback(t *testing.T) {
	fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")
	p := startServe(t, nil, "--model", fixture, "--backend", "cpu", "--api-key", "sesame", "--cors", "http://app.example")
	base := "http://" + p.addr
	secret := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(secret, []byte("private"), 0o600); err != nil {
		t.Fatal(err)
	}
	withKey := func(extra ...string) map[string]string {
		h := map[string]string{"Content-Type": "application/json", "Authorization": "Bearer sesame"}
		for i := 0; i+1 < len(extra); i += 2 {
			h[extra[i]] = extra[i+1]
		}
		return h
	}
	for _, tc := range []struct {
		name, method, path, body string
		header                   map[string]string
		want                     int
	}{
		{"Conversations without the key", "POST", "/api/call/Conversations", `[""]`, map[string]string{"Content-Type": "application/json"}, 401},
		{"SaveSettings without the key", "POST", "/api/call/SaveSettings", `[{}]`, map[string]string{"Content-Type": "application/json"}, 401},
		{"events without the key", "GET", "/api/events", "", nil, 401},
		{"Conversations with the key", "POST", "/api/call/Conversations", `[""]`, withKey(), 200},
		{"Conversations from the API's allowed origin", "POST", "/api/call/Conversations", `[""]`, withKey("Origin", "http://app.example"), 403},
		{"events from the API's allowed origin", "GET", "/api/events", "", withKey("Origin", "http://app.example"), 403},
		{"Conversations from the UI's own page", "POST", "/api/call/Conversations", `[""]`, withKey("Origin", base), 200},
		{"AttachFiles with the key", "POST", "/api/call/AttachFiles", `[["` + secret + `"]]`, withKey("Origin", base), 403},
		{"the API from its allowed origin", "GET", "/v1/models", "", withKey("Origin", "http://app.example"), 200},
	} {
		status, header, body := headRequest(t, tc.method, base+tc.path, tc.body, tc.header)
		if status != tc.want {
			t.Errorf("%s: %d %.200s, want %d", tc.name, status, body, tc.want)
		}
		if status == 401 && header.Get("WWW-Authenticate") == "" {
			t.Errorf("%s: 401 without WWW-Authenticate: a browser cannot ask for the key", tc.name)
		}
		if strings.HasPrefix(tc.path, "/api/call/") && status == 200 &&
			(header.Get("X-Frame-Options") != "DENY" || !strings.Contains(header.Get("Content-Security-Policy"), "frame-ancestors 'none'")) {
			t.Errorf("%s: no framing headers: %v", tc.name, header)
		}
	}
	if status, _, _ := serveRequest(t, "GET", base+"/health", "", nil); status != 200 {
		t.Errorf("/health without the key: %d", status)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// headRequest is serveRequest for answers that may be an endless event
// stream: it reads at most the first 4 KiB of the body, within 10 s.
func headRequest(t *testing.T, method, url, body string, header map[string]string) (int, http.Header, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	buf := make([]byte, 4096)
	n, _ := io.ReadAtLeast(res.Body, buf, 1)
	if res.Header.Get("Content-Type") != "text/event-stream" {
		rest, _ := io.ReadAll(io.LimitReader(res.Body, int64(len(buf)-n)))
		n += copy(buf[n:], rest)
	}
	return res.StatusCode, res.Header, string(buf[:n])
}

// TestServeNoUI: with --no-ui, serve is the API alone: nothing at / and no
// conversation database opened.
func TestServeNoUI(t *testing.T) {
	fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")
	data := t.TempDir()
	p := startServe(t, []string{"XDG_DATA_HOME=" + data}, "--model", fixture, "--backend", "cpu", "--no-ui")
	for _, path := range []string{"/", "/api/events"} {
		if status, _, body := serveRequest(t, "GET", "http://"+p.addr+path, "", nil); status != 404 {
			t.Errorf("GET %s with --no-ui: %d %.100s, want 404", path, status, body)
		}
	}
	if status, _, body := serveRequest(t, "GET", "http://"+p.addr+"/v1/models", "", nil); status != 200 {
		t.Errorf("GET /v1/models with --no-ui: %d %s", status, body)
	}
	if strings.Contains(p.log(), "chat UI at") {
		t.Errorf("serve --no-ui says it serves the chat UI:\n%s", p.log())
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	if entries, _ := os.ReadDir(data); len(entries) != 0 {
		t.Errorf("serve --no-ui wrote into the data folder: %v", entries)
	}
}

// TestServeModelThatFailsToLoad: serve, with the chat UI or without, ends
// with an error naming the folder when its model cannot load, rather than
// serving a model that is not there.
func TestServeModelThatFailsToLoad(t *testing.T) {
	broken := t.TempDir()
	fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "chat_template.jinja"} {
		data, err := os.ReadFile(filepath.Join(fixture, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(broken, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(broken, "model.safetensors"), []byte("not safetensors"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"serve", "--model", broken, "--addr", "127.0.0.1:0", "--db", filepath.Join(t.TempDir(), "chat.db"), "--settings", filepath.Join(t.TempDir(), "settings.json")},
		{"serve", "--model", broken, "--addr", "127.0.0.1:0", "--no-ui"},
	} {
		_, stderr, err := execute(t, args...)
		if err == nil || !strings.Contains(stderr, "loading "+broken) || !strings.Contains(stderr, "model.safetensors") {
			t.Errorf("%v: err %v, stderr %q; want it to end saying the model in %s did not load", args, err, stderr, broken)
		}
	}
}

// TestServeUsesSavedAPISettings: the API settings saved in the chat UI's
// Settings (as a save under serve stores them) are what serve listens with
// when it starts again without --addr and --cors; the flags still win.
func TestServeUsesSavedAPISettings(t *testing.T) {
	fixture := filepath.Join("..", "engine", "internal", "fixtures", "testdata", "qwen35moe-tiny", "mlx-4bit")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	settings := filepath.Join(dir, "settings.json")
	saved := fmt.Sprintf(`{"api_port": %d, "api_cors_origins": ["http://saved.example"]}`, port)
	if err := os.WriteFile(settings, []byte(saved), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--model", fixture, "--backend", "cpu", "--db", filepath.Join(dir, "chat.db"), "--settings", settings}
	allowed := func(p *serveProcess, origin string) string {
		_, header, _ := serveRequest(t, "GET", "http://"+p.addr+"/v1/models", "", map[string]string{"Origin": origin})
		return header.Get("Access-Control-Allow-Origin")
	}

	p := startServeArgs(t, nil, common...)
	if want := fmt.Sprintf("127.0.0.1:%d", port); p.addr != want {
		t.Errorf("serve listens on %s, want the saved port's %s", p.addr, want)
	}
	if got := allowed(p, "http://saved.example"); got != "http://saved.example" {
		t.Errorf("the saved origin is not allowed: Access-Control-Allow-Origin %q", got)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done

	// The command line's address and origins over the saved ones.
	p = startServe(t, nil, append(common, "--cors", "http://flag.example")...)
	if strings.HasSuffix(p.addr, fmt.Sprintf(":%d", port)) {
		t.Errorf("--addr 127.0.0.1:0 listened on the saved port %d", port)
	}
	if got := allowed(p, "http://saved.example"); got != "" {
		t.Errorf("with --cors, the saved origin is still allowed (%q)", got)
	}
	if got := allowed(p, "http://flag.example"); got != "http://flag.example" {
		t.Errorf("--cors's origin is not allowed: %q", got)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}
