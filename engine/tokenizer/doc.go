// Package tokenizer turns text into the model's token ids and back, exactly
// as Hugging Face `tokenizers` does for the byte-level BPE tokenizers of the
// Qwen family, reading the model folder's tokenizer.json.
//
// Encoding runs the same pipeline as the reference implementation:
//
//  1. Added tokens (`<|im_start|>`, `<think>`, …) are cut out of the raw text
//     first, leftmost-longest. Special ones are only recognised when the
//     caller asks for them (EncodeWithSpecials): text a user typed that reads
//     `<|im_start|>` is otherwise encoded as ordinary characters. Added tokens
//     that are not special (`<think>`, `<tool_call>`) are always recognised,
//     as Hugging Face does with split_special_tokens.
//  2. Each remaining piece is NFC-normalised.
//  3. The Split pre-tokenizer cuts it with the tokenizer's regex. The Qwen
//     regexes use a look-ahead that Go's regexp lacks; they are run by a
//     hand-written scanner (scanner.go) that is verified against
//     github.com/dlclark/regexp2 on a large random corpus. Any other pattern
//     runs through regexp2 itself.
//  4. Every pre-token's bytes are mapped to token ids one byte each and
//     merged by rank (bpe.go); results for repeated words are cached.
//
// Decoding concatenates the tokens' bytes and replaces invalid UTF-8 the way
// Rust's String::from_utf8_lossy does (one U+FFFD per maximal invalid
// subpart). StreamDecoder does the same incrementally, emitting only
// complete characters, so that what a stream emits equals Decode of all ids.
package tokenizer
