package server

import (
	"encoding/json"
	"net/http"
)

// sseWriter writes server-sent events: "event: NAME\n" when the API names
// its events (Anthropic, Responses), then "data: JSON\n\n".
type sseWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	buf   []byte
	began bool
}

func newSSE(w http.ResponseWriter) *sseWriter {
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// begin sends the stream's headers.
func (s *sseWriter) begin() {
	if s.began {
		return
	}
	s.began = true
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	s.w.WriteHeader(http.StatusOK)
}

// event queues one event; flush sends what is queued.
func (s *sseWriter) event(name string, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return s.raw(name, data)
}

func (s *sseWriter) raw(name string, data []byte) error {
	s.begin()
	if name != "" {
		s.buf = append(s.buf, "event: "...)
		s.buf = append(s.buf, name...)
		s.buf = append(s.buf, '\n')
	}
	s.buf = append(s.buf, "data: "...)
	s.buf = append(s.buf, data...)
	s.buf = append(s.buf, "\n\n"...)
	return nil
}

// flush writes the queued events to the client. An error means the client
// is gone.
func (s *sseWriter) flush() error {
	s.begin()
	if len(s.buf) > 0 {
		_, err := s.w.Write(s.buf)
		s.buf = s.buf[:0]
		if err != nil {
			return err
		}
	}
	return s.rc.Flush()
}

// comment sends an SSE comment line, which every client's parser skips: a
// keep-alive that no API's event sequence has to make room for.
func (s *sseWriter) comment(text string) error {
	s.begin()
	s.buf = append(s.buf, ": "...)
	s.buf = append(s.buf, text...)
	s.buf = append(s.buf, "\n\n"...)
	return s.flush()
}
