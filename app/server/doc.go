// Package server is Suzuran's local HTTP API: OpenAI-compatible
// (/v1/chat/completions, /v1/completions, /v1/responses, /v1/models) and
// Anthropic-compatible (/v1/messages, /v1/messages/count_tokens), streamed
// as server-sent events, plus /health, in front of one engine.
//
// The server does not own the engine. Whoever does (app/modelhost's Host,
// which loads, switches and unloads models, in the window and under
// `suzuran serve`) hands it over through Models on every request, so the
// server can be started and shut down any number of times without
// touching the model.
//
// A request flows: the safety checks (middleware.go: Host header against
// DNS rebinding, CORS for configured origins on /v1/ (the UI answers its
// own page only), the body limit, the key (on every route but /health) in
// constant time, one access-log line), then the API's decoder turns the
// body into a chatTurn (openai_chat.go, anthropic.go, responses.go) or a
// raw prompt (openai_completions.go); prepare renders it with the model's
// chat template; submit queues it on the engine (generate.go), whose full
// queue is a 429; run feeds the engine's tokens through engine/chat's
// parser (reasoning, content, tool calls) to the API's writer, which sends
// each step as SSE events or collects the whole answer. A client that
// leaves cancels its generation (the engine stops within a token);
// Shutdown frees the port at once and cancels what is still running after
// a short grace.
//
// Errors reach clients in their API's shape (errors.go) with the status the
// SDKs expect: 4xx for anything the request got wrong, so that they do not
// retry it, 503 while the model loads, 429 when the queue is full.
//
// Constrained sampling (response_format json_schema, forced tool calls)
// is reached through one function variable, constrain (constraint.go).
package server
