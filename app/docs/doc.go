// Package docs turns documents a user attaches to a conversation into the
// text the model reads, and places that text in the prompt.
//
// Extraction: Extract and ExtractFile read one document, decide its format
// from its content (and its name's extension where the content alone does
// not tell, as with source code or CSV), and run the matching extractor:
//
//	plain text, Markdown   as decoded (encoding.go: BOMs, UTF-8, legacy encodings)
//	source code            a fenced code block named by language
//	CSV, TSV               a Markdown table
//	JSON                   a fenced json block, validated
//	HTML                   the readable text, tables as Markdown tables
//	PDF                    text in reading order, columns one after another, pages numbered
//	DOCX                   paragraphs, headings, lists, tables as Markdown tables
//	XLSX                   one Markdown table per sheet
//	EPUB                   the chapters in spine order, each through the HTML extractor
//	RTF                    the text, tables as Markdown tables
//
// Anything else (images, archives, programs) is refused with an error that
// names its type. Every extraction runs under Limits (input bytes, pages,
// time, unpacked size of ZIP-based formats, characters and tokens of the
// text) and stops early when its context is cancelled; Progress reports how
// far a large document has come. Nothing in a document is executed, fetched
// or followed: links are kept as text, XML documents with a DOCTYPE (where
// external entities live) are refused, and ZIP containers are checked
// against their unpacked size before any part is read.
//
// Memory follows the text, not the file's tricks: the parts of ZIP-based
// documents are streamed, never read whole, and what they unpack counts
// against the unpacked limit however often a part is read; an EPUB chapter
// listed many times is read once; the text counts against the character
// limit as it is read (a shared string of a workbook once for every cell
// that shows it), and the extraction stops with ErrTextLimit as soon as it
// passes. No piece of text or markup longer than 16 MB without a tag is
// held (a real document has none). A PDF page's content is scanned,
// streamed, before the PDF library reads it: a page that shows more than
// 512 KB of text or gives an operator more than 65,536 values is refused,
// since the library would hold all of it. Nesting is bounded where each
// level keeps state: XML elements (1,000 deep) and RTF groups (10,000)
// are refused beyond it, HTML lists and tables beyond 256 are read as the
// text of the innermost one kept; a CSV of more cells than a quarter of the
// character limit, and a workbook whose cells show more than it, are
// refused before they are parsed. TestDocumentBombs measures the peak
// memory of such files.
//
// API: OpenAIFile and AnthropicDocument turn the HTTP API's document parts
// (OpenAI "file" content parts with base64 file_data, Anthropic "document"
// blocks) into a name and bytes for Extract, so that they go through the
// same extraction as a dropped file; a URL source is refused, not fetched.
//
// Prompt: NewAttachment counts a Document's tokens with the model's
// tokenizer and gives the record a conversation stores. UserMessage places
// attachments in a delimited block before the question. Budget.Check says
// whether the documents fit in the context beside the conversation and the
// room kept for the answer, with the numbers; FitDocuments cuts them to fit, keeping
// the beginning or the end of each, and marks every cut in the text itself,
// so that nothing is ever dropped without the model and the user seeing it.
package docs
