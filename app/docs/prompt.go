package docs

import (
	"context"
	"errors"
	"fmt"
	"html"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

// UserMessage is the text of a user turn that carries attachments: the
// document block (DocumentBlock) followed by the question. Without
// attachments it is the question alone.
func UserMessage(attachments []Attachment, question string) string {
	if len(attachments) == 0 {
		return question
	}
	return DocumentBlock(attachments) + "\n\n" + question
}

// DocumentBlock places attachments between delimiters the model can rely
// on, each document with its file name:
//
//	<documents>
//	<document name="report.pdf" type="PDF document" pages="12">
//	…text…
//	</document>
//	</documents>
//
// A document's text that itself contains the delimiters has them broken
// ("</ document>"), so that no document can end the block early and pass
// its own text off as the user's.
func DocumentBlock(attachments []Attachment) string {
	var b strings.Builder
	b.WriteString("<documents>\n")
	for _, a := range attachments {
		b.WriteString(`<document name="` + html.EscapeString(a.Name) + `"`)
		if a.Type != "" {
			b.WriteString(` type="` + html.EscapeString(a.Type) + `"`)
		}
		if a.Pages > 0 {
			unit := a.PageUnit
			if unit == "" {
				unit = "pages"
			}
			b.WriteString(" " + unit + `="` + strconv.Itoa(a.Pages) + `"`)
		}
		b.WriteString(">\n")
		b.WriteString(delimiters.ReplaceAllStringFunc(a.Text, breakDelimiter))
		b.WriteString("\n</document>\n")
	}
	b.WriteString("</documents>")
	return b.String()
}

var delimiters = regexp.MustCompile(`(?i)<(/?)(documents?)\b`)

func breakDelimiter(s string) string {
	m := delimiters.FindStringSubmatch(s)
	return "<" + m[1] + " " + m[2]
}

// Budget is what the context holds besides the documents. The service
// fills it from the engine's context size and its own rendering of the
// conversation.
type Budget struct {
	// ContextTokens is the most tokens one request may hold, prompt and
	// answer together (the engine's context).
	ContextTokens int
	// ConversationTokens counts the rendered prompt without the documents:
	// earlier turns, the new question and the chat template's tokens.
	ConversationTokens int
	// AnswerTokens is room kept for the answer.
	AnswerTokens int
}

// Fit is the outcome of a budget check, with its numbers.
type Fit struct {
	Budget
	// DocumentTokens counts the whole document block and the line break
	// that joins it to the question.
	DocumentTokens int
	// AvailableTokens is what the context leaves for documents:
	// ContextTokens − ConversationTokens − AnswerTokens (may be negative).
	AvailableTokens int
	// OverTokens is DocumentTokens − AvailableTokens when positive.
	OverTokens int
	Fits       bool
}

// Check counts the document block of attachments and compares it with the
// room the budget leaves.
func (b Budget) Check(tok Tokenizer, attachments []Attachment) Fit {
	f := Fit{Budget: b, AvailableTokens: b.ContextTokens - b.ConversationTokens - b.AnswerTokens}
	if len(attachments) > 0 {
		f.DocumentTokens = len(tok.Encode(DocumentBlock(attachments) + "\n\n"))
	}
	f.OverTokens = max(0, f.DocumentTokens-f.AvailableTokens)
	f.Fits = f.OverTokens == 0
	return f
}

// Message says, for the user, whether the documents fit and by how much
// they do not; the window shows it before sending, with the choices to
// keep the beginning, keep the end, or cancel.
func (f Fit) Message() string {
	if f.Fits {
		return fmt.Sprintf("The documents (%s tokens) fit: the conversation uses %s and %s are kept for the answer, of a %s-token context.",
			thousands(f.DocumentTokens), thousands(f.ConversationTokens), thousands(f.AnswerTokens), thousands(f.ContextTokens))
	}
	if f.AvailableTokens <= 0 {
		return fmt.Sprintf("The conversation alone uses %s of the %s-token context (with %s kept for the answer), leaving no room for documents (%s tokens). Start a new conversation to ask about them.",
			thousands(f.ConversationTokens), thousands(f.ContextTokens), thousands(f.AnswerTokens), thousands(f.DocumentTokens))
	}
	return fmt.Sprintf("The documents need %s tokens, but only %s of the %s-token context are left after the conversation (%s) and room for the answer (%s): %s tokens too many. Keep the beginning of each document, keep the end, or cancel.",
		thousands(f.DocumentTokens), thousands(f.AvailableTokens), thousands(f.ContextTokens),
		thousands(f.ConversationTokens), thousands(f.AnswerTokens), thousands(f.OverTokens))
}

// ErrNoRoom is returned by FitDocuments when the conversation leaves no
// room for any document text.
var ErrNoRoom = errors.New("no room for documents in the context")

// FitDocuments shortens attachments so that their block fits the budget,
// keeping the beginning or the end of each; attachments that already fit
// come back unchanged. The room is shared out fairly: documents smaller
// than an equal share stay whole, and the rest split what is left. Every
// shortened document carries a note in its text saying what was left out,
// and a Cut record with the numbers.
func FitDocuments(ctx context.Context, tok Tokenizer, attachments []Attachment, b Budget, keep Keep) ([]Attachment, Fit, error) {
	if keep != KeepBeginning && keep != KeepEnd {
		return nil, Fit{}, fmt.Errorf("keep must be %q or %q, not %q", KeepBeginning, KeepEnd, keep)
	}
	fit := b.Check(tok, attachments)
	if fit.Fits {
		return attachments, fit, nil
	}
	// What the block costs around the texts: delimiters, names, and the
	// notes that mark cuts (counted at their longest).
	shells := make([]Attachment, len(attachments))
	for i, a := range attachments {
		shells[i] = a
		shells[i].Text = cutNote(keep, a.Tokens, a.Tokens)
	}
	overhead := len(tok.Encode(DocumentBlock(shells) + "\n\n"))
	room := fit.AvailableTokens - overhead
	if room <= 0 {
		return nil, fit, fmt.Errorf("%w: %s", ErrNoRoom, fit.Message())
	}
	ids := make([][]int, len(attachments))
	for i, a := range attachments {
		if err := ctx.Err(); err != nil {
			return nil, fit, err
		}
		ids[i] = tok.Encode(a.Text)
	}
	// Cutting at token boundaries can make the joined text tokenize a
	// few tokens differently; each round takes the excess off the shares.
	for round := 0; round < 8; round++ {
		shares := shareOut(ids, room)
		out := make([]Attachment, len(attachments))
		for i, a := range attachments {
			out[i] = a
			if shares[i] >= len(ids[i]) {
				continue
			}
			kept := cutText(tok, ids[i], shares[i], keep)
			if keep == KeepEnd {
				out[i].Text = cutNote(keep, len(ids[i])-shares[i], len(ids[i])) + "\n\n" + kept
			} else {
				out[i].Text = kept + "\n\n" + cutNote(keep, len(ids[i])-shares[i], len(ids[i]))
			}
			out[i].Tokens = len(tok.Encode(out[i].Text))
			out[i].Cut = &Cut{Keep: keep, OriginalTokens: len(ids[i]), KeptTokens: shares[i]}
		}
		after := b.Check(tok, out)
		if after.Fits {
			return out, after, nil
		}
		room -= after.OverTokens
		if room <= 0 {
			break
		}
	}
	return nil, fit, fmt.Errorf("%w: %s", ErrNoRoom, fit.Message())
}

// shareOut divides room tokens among documents of the given lengths:
// water-filling, so that no document gets more than it needs and the
// others share the rest equally.
func shareOut(ids [][]int, room int) []int {
	order := make([]int, len(ids))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(ids[a]) - len(ids[b]) })
	shares := make([]int, len(ids))
	left := room
	for k, i := range order {
		equal := left / (len(order) - k)
		shares[i] = min(len(ids[i]), equal)
		left -= shares[i]
	}
	return shares
}

// cutNote is the line that marks a cut in a document's text, so that the
// model (and anyone reading the conversation) knows part is missing.
func cutNote(keep Keep, dropped, total int) string {
	if keep == KeepEnd {
		return fmt.Sprintf("[The beginning of this document, %s of its %s tokens, did not fit in the context and was left out.]", thousands(dropped), thousands(total))
	}
	return fmt.Sprintf("[The rest of this document, %s of its %s tokens, did not fit in the context and was left out.]", thousands(dropped), thousands(total))
}

// Thousands writes n with thousands separators, as English does: 32,768.
func Thousands(n int) string { return english.Sprintf("%d", n) }

// english formats numbers for the messages people read.
var english = message.NewPrinter(language.English)

func thousands(n int) string { return Thousands(n) }
