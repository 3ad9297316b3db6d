package server

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/engine"
)

var (
	fuzzOnce   sync.Once
	fuzzServer *Server
	fuzzEngine *engine.Engine
)

// fuzzTarget loads the fixture once per fuzzing process.
func fuzzTarget(t *testing.T) (*Server, *engine.Engine) {
	fuzzOnce.Do(func() {
		l := modelhost.New(modelhost.Options{})
		l.Load(fixtureDir)
		if _, err := l.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		fuzzEngine, _, _ = l.Current(context.Background())
		fuzzServer, _ = New(Config{Models: l})
	})
	return fuzzServer, fuzzEngine
}

// checkClientError fails unless err is nil or an error the client caused,
// answered with a 4xx.
func checkClientError(t *testing.T, api string, err error, body []byte) {
	if err == nil {
		return
	}
	var e *apiError
	if !errors.As(err, &e) {
		t.Fatalf("%s: %T %v is not an API error (it would be a 500) for %q", api, err, err, body)
	}
	if e.Status < 400 || e.Status >= 500 {
		t.Fatalf("%s: status %d for %q: %v", api, e.Status, body, err)
	}
}

// FuzzDecoders feeds arbitrary bodies through the request decoders of the
// OpenAI (chat completions, completions, responses) and Anthropic
// (messages) APIs, up to the rendered and tokenized prompt: no input may
// panic, and every failure must be a 4xx. (Generation itself is not
// fuzzed: past the prompt, the engine validates what it is given.)
func FuzzDecoders(f *testing.F) {
	for _, seed := range []string{
		`{"model":"mlx-4bit","messages":[{"role":"user","content":"Hi"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"s"}]},{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},{"role":"tool","tool_call_id":"1","content":"r"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer"}}}}}],"tool_choice":"auto"}`,
		`{"messages":[{"role":"user","content":"x"}],"stop":["a","b"],"temperature":0.5,"top_p":0.9,"top_k":20,"min_p":0.1,"seed":-3,"n":1,"logprobs":true,"top_logprobs":3,"chat_template_kwargs":{"enable_thinking":false},"reasoning_effort":"none"}`,
		`{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"p","schema":{"type":"object"},"strict":true}}}`,
		`{"max_tokens":2000,"system":[{"type":"text","text":"s"}],"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":[{"type":"thinking","thinking":"t"},{"type":"tool_use","id":"t1","name":"f","input":{"a":"b"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok","is_error":true},{"type":"text","text":"go"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"},"thinking":{"type":"enabled","budget_tokens":1024},"stop_sequences":["x"]}`,
		`{"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":"o"}],"instructions":"i","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"text":{"format":{"type":"text"}}}`,
		`{"prompt":[1,2,3],"max_tokens":2,"echo":false}`,
		`{"prompt":"<|im_start|>user\nhi<|im_end|>"}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"file","file":{"filename":"a.txt","file_data":"aGVsbG8="}}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"document","source":{"type":"text","data":"hi"}},{"type":"text","text":"q"}]}],"max_tokens":4}`,
		`{"input":[{"role":"user","content":[{"type":"input_file","filename":"a.csv","file_data":"data:text/csv;base64,YSxiCjEsMgo="}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAEAAAABACAIAAAAlC+aJAAAEm0lEQVR4nO2Zb0wbZRzHf8/d03vo9Q+llHVz0A4MuCFjyDBi2FgGCS+IxhhN3Jw6p84sMcO4SKIvlmjEP5mJqC8WNRDjBktmXNhCZFkcvpEoy6LLQmS6gUAp0ElbCv1H2+udL/qHpiu0YaVH8b75vrj0eZ7c93O/5+56z4MAAANZtWX3MTZNwzEByGJLAGvmVstrkILWL0Aq6TciABdYXHDeRAAU0PrcRkyrM5z7PcflOd6DgBpt7PHcGa83/QYA02cuzJzt4Vzu0ra3tY11KwG4bNfydA2EzvN7p6yua4X5T2caQPdc6BF5+EXXonkaAPxW+0z3xeorZzwj40MHjtf+8eNKADzvB4oGTOTKh2QyHWByy3Rqp6Et1DpoenOP4VsAMmzrcAfMIPB2//AB4w0A0m2qOWy4Hep22vRAi8EFQE6ZvOWssJVBZfKcHqvZywt1qs1N6mIAcsx0tUlVettn8/CB5zW1e9kdsTEEYMzfdFdd6gCAgN1RdOwQoqicrVsCdkeSKcTm19gsfXJFsUpVqVSWhufiUh8UOi7Xn8BARu1dekVdpBXFdJsHzAKQoOCtUKu2s5reWWuzzlDI5H4yeaNJux2ABAVeJWPfL6izBXwnp3r2qqtiY/zivqXevZMpyAcARVmJoqwEAP69eEXXvD8JQI62gs2tCLgm7Naf/aq7m3TNsckEEKLHTt+kxTPQYDwPiMRxCpEhCMGDag0AadYbhxacfy1YvHww1MQD7Mt7GGiix2oP74+L0T3/k6Hls9ig3jHTxOed1Ze/iwOgAJOoBeADfjtF1Ir8Gn3xq/OO64AjoTHhECcIXLgnjW9aPqoqbKNkiujY0IEPMUEhPIRCCGECmHRNjwGN63UlVIgNE4wolqjCp0YoNsafAbOKVrKlxdGUQbdn6KUT5ac/ZHTalQAAE+dkX1DwASY8cJjRAiY0zS5ys4CJzflr9Ez/2M5uyt2Xq6yKDmRozRzHACZ/OxGKBorENS+6q7RFHIU5IcyJYkOHqhdxt7XvkP6ZpYyCMHz0HWPLEfWjlUkeowgT5bYnHOMXKIpBCOuLXwZMthiOjE98IcN5KsUOCjGh/iN3v9Yodg2MHkRA7S+9hCnymGG6fwLk2L9ZQWgUnXXhefV4gfHLkcFCeZ6cZjgaYxR3zyxNvynf3CzneERT/X0k4kxXj61/IGB3THWep5Xsrh++igVAUPuK2H8nE/vdq/p7r3eSCqwzp6QsA3jD0JHdANlUgU+fTXBjDMLrWQOQYlk2AIBM9Ez/9wpIAJn0nqeuS+tC68yZADh352BKL1XgAbwAjtQ6Z/QeWEMlBtjt6gQAgPaVBwsAfgD/su0cAAfgTmfee7RcBbJG8Z+US994WaJ0VqD9hcaEvz/5wX0ETKasn0ISgNiSAMSWBCC2JACxtdxHfdZoA1RAAhBXEoDYkgDElgQgtpYD4MQOlqoyAdB7cgwA3urqbzg+mpZd2tajdFKAtVmNStsq4NL1TQzwe+u2VexUw0ziZZWQ6lvNaUqfAsDq/HFRkk3/9AG41wQggwYJQFS391ZKW0zrxhsAIMt26uP9Hz7nlRINGo9RAAAAAElFTkSuQmCC","detail":"low"}},{"type":"text","text":"q"}]}]}`,
		`{"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}]}],"max_tokens":4}`,
		`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png"}]}]}`,
		`{"messages":"x","max_tokens":-1}`,
		`[]`, `null`, `{"temperature":1e400}`, `{"messages":[{"role":"user","content":"\ud800"}]}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		s, e := fuzzTarget(t)

		var chatReq chatCompletionRequest
		err := decodeJSON(body, &chatReq)
		if err == nil {
			var turn *chatTurn
			if turn, err = chatReq.turn(); err == nil {
				err = prepareWithDocuments(s, e, turn)
			}
		}
		checkClientError(t, "chat completions", err, body)

		var msgReq messagesRequest
		err = decodeJSON(body, &msgReq)
		if err == nil {
			var turn *chatTurn
			if turn, err = msgReq.turn(false); err == nil {
				err = prepareWithDocuments(s, e, turn)
			}
		}
		checkClientError(t, "messages", err, body)

		var respReq responsesRequest
		err = decodeJSON(body, &respReq)
		if err == nil {
			var turn *chatTurn
			if turn, err = respReq.turn(); err == nil {
				err = prepareWithDocuments(s, e, turn)
			}
		}
		checkClientError(t, "responses", err, body)

		var compReq completionRequest
		err = decodeJSON(body, &compReq)
		if err == nil {
			_, err = promptIDs(compReq.Prompt, e)
		}
		checkClientError(t, "completions", err, body)
	})
}

// prepareWithDocuments is what startTurn does with a decoded turn: its
// documents read, then the prompt rendered.
func prepareWithDocuments(s *Server, e *engine.Engine, turn *chatTurn) error {
	if err := s.readDocuments(context.Background(), e, turn); err != nil {
		return err
	}
	_, err := s.prepare(e, turn)
	return err
}
