package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"net/http"
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
// for the desktop window, so the two transports cannot drift apart. The
// handler does no Host or key checks of its own: it runs behind the API
// server's safety middleware (app/server), or on a loopback address.
func Handler(s *Service, ui fs.FS) http.Handler {
	mux := http.NewServeMux()
	target := reflect.ValueOf(s.UI())
	mux.HandleFunc("POST /api/call/{method}", func(w http.ResponseWriter, r *http.Request) {
		serveCall(w, r, target)
	})
	mux.HandleFunc("GET /api/events", func(w http.ResponseWriter, r *http.Request) {
		serveEvents(w, r, s)
	})
	if ui != nil {
		mux.Handle("GET /", http.FileServerFS(ui))
	}
	return mux
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
