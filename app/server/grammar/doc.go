// Package grammar constrains what the model may write: JSON that a schema
// validates (response_format json_object and json_schema, the Responses
// API's text.format) and forced tool calls (tool_choice "required" or a
// named function) in the Qwen3.5/3.6 tool-call format. It turns each into
// an engine.Constraint, which the engine applies to the logits before every
// token is sampled, so the output is valid by construction instead of by
// retrying.
//
// The pieces:
//
//   - A Vocabulary is built once per loaded model: every token's bytes, laid
//     out as a trie in depth-first order, so that the tokens allowed after
//     an automaton state are found by one walk that steps the automaton
//     once per trie node and jumps over the subtree of any byte that leads
//     nowhere.
//   - JSONObject, JSONSchema and ToolCall compile a language into a byte
//     level automaton (an NFA from Thompson's construction, determinized
//     lazily): a Grammar. Everything is finite: whitespace between tokens
//     is bounded (nothing, a space, or a newline and up to 20 spaces or
//     tabs), numbers have bounded digits, and values a schema leaves open
//     (json_object, {}, an object without properties) nest a bounded number
//     of levels, so the model can neither pad nor nest forever.
//   - A Grammar's Constraint follows one request. Its mask for an automaton
//     state (the tokens whose bytes lead to a live state, plus EOS where
//     the text may end) is computed the first time the state is met and
//     kept in the Grammar, so a step usually costs a lookup per byte of the
//     chosen token and one pass over the mask. When the text is complete
//     and nothing can follow it (the closing brace of the object), Done
//     reports it and the engine ends the request.
//   - A Constraint given its request's budget (WithBudget) closes the text
//     before the budget runs out: near the end it lets through only tokens
//     after which the text can still be completed in the tokens left
//     (budget.go), so an answer cut by max_tokens still parses and
//     validates; FitsIn says whether any valid text fits a budget at all.
//
// A server uses it so:
//
//	grammars, err := grammar.Shared(e) // or ForEngine(e, 0): once per loaded model
//	o := grammar.Options{Thinking: chat.PromptOpensThinking(prompt.Text)}
//	g, err := grammars.JSONSchema(schemaJSON, o) // or JSONObject(o), or
//	// ToolCall(fns, o) with fns from Functions(tools)
//	// err is a *SchemaError for a schema it cannot compile: answer 400.
//	stream, err := e.Submit(ctx, engine.Request{..., Constraint: g.NewConstraint()})
//
// Schema support: type (one or a list), enum, const, anyOf, oneOf (as
// anyOf: exact when its branches are disjoint), allOf of one schema, local
// $ref (not recursive), nullable; properties, required and
// additionalProperties (with properties, exactly the listed properties are
// written, in schema order, the optional ones optionally; without, a map
// whose values follow additionalProperties); items, prefixItems, minItems
// and maxItems; minLength and maxLength; pattern (RE2 syntax, as Go's
// regexp/syntax reads it; not combined with a length or format, and not in
// a tool call's parameters); the formats date, time, date-time and uuid; integers with minimum, maximum and their exclusive forms;
// numbers (with minimum 0 as the only bound); strings with escapes and any
// Unicode; booleans and null. Annotations (title, description, default,
// examples, $defs, …) are ignored. Any other keyword (multipleOf, not,
// a bound on a number, …) is a *SchemaError that names it.
package grammar
