// Package chat renders conversations into the model's prompt format and
// reads the model's output back into reasoning, content and tool calls.
//
// Rendering runs the model's own chat template (chat_template.jinja, or
// the chat_template field of tokenizer_config.json) through a Jinja engine,
// github.com/ardanlabs/jinja, so the prompt is exactly what the model was
// trained on. Request JSON is decoded into ordered values (Object) before it
// reaches the template: the template prints tools and tool-call arguments
// with tojson, and transformers keeps keys in the order the client sent them.
//
// Where the Go Jinja engine still prints differently from Python's (its
// filters cannot be replaced from outside the package): a float with an
// integral value prints as "1" where Python prints "1.0", floats of a
// million and more switch to exponent form earlier ("1.234567e+06" for
// 1234567.0), null prints as "" where Python prints "None", and tojson
// escapes U+2028/U+2029. These only arise when tool-call arguments or tool
// schemas hold such values; integers, strings, booleans, nested objects
// and ordinary fractions render exactly.
//
// The template drops the reasoning of assistant turns that precede the last
// user message, so a conversation's next prompt stops matching the previous
// one right after the header of the last assistant turn. PromptCheckpoints
// reports that position, so that the engine can snapshot its state there
// and reuse it on the next turn.
//
// Images enter a message as ImagePart values in its list of content
// parts: the template sees {"type": "image"} and prints
// <|vision_start|><|image_pad|><|vision_end|> as the checkpoint says, and
// the rendered prompt repeats <|image_pad|> to the image's merged token
// count, as transformers' processor does; Prompt.Images lists the images in
// the order of their runs.
//
// Parser splits generated text into reasoning (between <think> and
// </think>), content, and Qwen3.5/3.6 tool calls
//
//	<tool_call>
//	<function=NAME>
//	<parameter=P>
//	value
//	</parameter>
//	</function>
//	</tool_call>
//
// incrementally, as a stream of events, holding back only text that might
// still turn out to be the start of a tag.
package chat
