// Package server is Suzuran's local HTTP API: OpenAI-compatible
// (/v1/chat/completions, /v1/completions, /v1/responses, /v1/models) and
// Anthropic-compatible (/v1/messages), streamed as server-sent events, in
// front of the engine that whoever owns it (the app's service, or the serve
// command's loader) hands over through Models.
package server
