package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/suzuran-app/suzuran/app/store"
)

// Handler is the browser's transport to the service, and the UI itself:
//
//	POST /api/call/<Method>   a UI method: the body is the JSON array of its
//	                          arguments, the answer {"result": …} or
//	                          {"error": "…"}
//	GET  /api/events          the events, as server-sent events
//	GET  /…                   the built frontend (ui), index.html at /
//
// The methods are found on UI by reflection, exactly as Wails binds them
// for the desktop window, so the two transports cannot drift apart; those
// that take paths on this machine's disk (desktopOnly) are the desktop
// window's alone. The calls and the events answer only the page this
// handler serves: a browser request from any other origin is refused
// (fromOwnPage), whatever origins the API allows. Every answer forbids
// framing and carries a Content-Security-Policy the built frontend
// satisfies (pageHeaders). The handler does no Host or key checks of its
// own: it runs behind the API server's safety middleware (app/server),
// which requires the key, when one is set, on everything here.
func Handler(s *Service, ui fs.FS) http.Handler {
	mux := http.NewServeMux()
	target := reflect.ValueOf(s.UI())
	mux.HandleFunc("POST /api/call/{method}", func(w http.ResponseWriter, r *http.Request) {
		if !fromOwnPage(r) {
			writeCall(w, http.StatusForbidden, callResponse{Error: notOwnPage(r)})
			return
		}
		serveCall(w, r, target)
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		if !fromOwnPage(r) {
			http.Error(w, notOwnPage(r), http.StatusForbidden)
			return
		}
		serveEvents(w, r, s)
	})
	if ui != nil {
		mux.Handle("GET /", http.FileServerFS(ui))
	}
	return pageHeaders(mux)
}

// ContentSecurityPolicy is the chat UI's policy: its scripts, styles and
// connections come from its own server only (the built frontend has no
// inline script or style, and nothing it renders may load from elsewhere:
// an image in a reply that points at another site is not fetched), and no
// page may frame it.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// pageHeaders adds the UI's security headers to every answer.
func pageHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		next.ServeHTTP(w, r)
	})
}

// fromOwnPage reports whether a call or the event stream comes from the
// page this server served, or from no browser at all (a browser names the
// requesting page's origin in Origin on every POST and cross-origin
// request, and says where a request comes from in Sec-Fetch-Site).
func fromOwnPage(r *http.Request) bool {
	if origin := r.Header.Get("Origin"); origin != "" {
		u, err := url.Parse(origin)
		if err != nil || u.Host == "" || !strings.EqualFold(u.Host, r.Host) {
			return false
		}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
		return true
	}
	return false
}

func notOwnPage(r *http.Request) string {
	from := r.Header.Get("Origin")
	if from == "" {
		from = "a " + r.Header.Get("Sec-Fetch-Site") + " page"
	}
	return fmt.Sprintf("%s may not use the chat window's connection: it answers only the page this server serves (http://%s/); web apps call the API under /v1 from the origins it allows", from, r.Host)
}

// desktopOnly are the UI methods the HTTP transport refuses, with why: they
// take paths on this machine's disk, which only the desktop window hands
// over (the user's own drop or file dialog). A browser has no paths: it
// sends a file's content (AttachData).
var desktopOnly = map[string]string{
	"AttachFiles": "AttachFiles takes file paths, which only the desktop window hands over: in a browser, upload the file (AttachData sends its content)",
}

// callResponse is the body of a call's answer.
type callResponse struct {
	Result any    `json:"result,omitempty"`
	Error  string `json:"error,omitempty"`
}

var errorType = reflect.TypeFor[error]()

func serveCall(w http.ResponseWriter, r *http.Request, target reflect.Value) {
	// A JSON content type cannot be sent cross-site without a CORS
	// preflight, which nothing here answers: a page on another site cannot
	// make these calls through the user's browser.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		writeCall(w, http.StatusUnsupportedMediaType, callResponse{Error: "send the arguments as a JSON array with Content-Type: application/json"})
		return
	}
	name := r.PathValue("method")
	if why, ok := desktopOnly[name]; ok {
		writeCall(w, http.StatusForbidden, callResponse{Error: why})
		return
	}
	method := target.MethodByName(name)
	if !method.IsValid() {
		writeCall(w, http.StatusNotFound, callResponse{Error: fmt.Sprintf("no method %q", name)})
		return
	}
	var raw []json.RawMessage
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCallBytes))
	if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
		writeCall(w, http.StatusRequestEntityTooLarge, callResponse{Error: fmt.Sprintf("%s: the call is larger than %s; the window attaches files of up to %s",
			name, megabytes(maxCallBytes), megabytes(MaxUploadBytes))})
		return
	}
	if err == nil && len(strings.TrimSpace(string(body))) > 0 {
		err = json.Unmarshal(body, &raw)
	}
	mt := method.Type()
	if err != nil || len(raw) != mt.NumIn() {
		writeCall(w, http.StatusBadRequest, callResponse{Error: fmt.Sprintf("%s takes a JSON array of %d arguments", name, mt.NumIn())})
		return
	}
	args := make([]reflect.Value, mt.NumIn())
	for i := range args {
		p := reflect.New(mt.In(i))
		if err := json.Unmarshal(raw[i], p.Interface()); err != nil {
			writeCall(w, http.StatusBadRequest, callResponse{Error: fmt.Sprintf("%s: argument %d: %v", name, i+1, err)})
			return
		}
		args[i] = p.Elem()
	}
	var resp callResponse
	for _, out := range method.Call(args) {
		if out.Type() == errorType {
			if !out.IsNil() {
				resp.Error = out.Interface().(error).Error()
			}
			continue
		}
		resp.Result = out.Interface()
	}
	status := http.StatusOK
	if resp.Error != "" {
		status = http.StatusUnprocessableEntity
		if errors.Is(callErr(resp.Error), store.ErrNotFound) {
			status = http.StatusNotFound
		}
		resp.Result = nil
	}
	writeCall(w, status, resp)
}

// callErr turns an error text back into something errors.Is can test for
// "not found" (the text is all that crosses reflection's any).
func callErr(text string) error {
	if strings.HasSuffix(text, store.ErrNotFound.Error()) {
		return store.ErrNotFound
	}
	return errors.New(text)
}

func writeCall(w http.ResponseWriter, status int, resp callResponse) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(resp)
}

// sseHeartbeat keeps idle event streams open through proxies and lets a
// vanished client be noticed.
const sseHeartbeat = 15 * time.Second

func serveEvents(w http.ResponseWriter, r *http.Request, s *Service) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported here", http.StatusInternalServerError)
		return
	}
	events, cancel := s.Subscribe()
	defer cancel()
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// A first comment tells the browser the stream is open.
	io.WriteString(w, ": suzuran events\n\n")
	flusher.Flush()
	beat := time.NewTicker(sseHeartbeat)
	defer beat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-beat.C:
			io.WriteString(w, ": keep-alive\n\n")
			flusher.Flush()
		case ev, ok := <-events:
			if !ok {
				// Fell behind: end the stream; the page reconnects and
				// reloads what it shows.
				return
			}
			data, err := json.Marshal(ev)
			if err != nil {
				continue
			}
			fmt.Fprintf(w, "data: %s\n\n", data)
			flusher.Flush()
		}
	}
}
