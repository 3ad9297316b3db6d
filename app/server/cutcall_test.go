package server

import (
	"strings"
	"testing"

	"github.com/suzuran-app/suzuran/engine/chat"
)

// TestCutToolCallIsText: an unconstrained output cut inside its second tool
// call (by max_tokens) gives the first call whole and the second as the
// text the model wrote of it, at every cut point and token size; the whole
// output gives both calls, event for event as the parser gives them.
func TestCutToolCallIsText(t *testing.T) {
	second := strings.Index(modelToolOutput, "<tool_call>\n<function=get_time>")
	run := func(output string, n int) (events []chat.Event) {
		p := chat.NewParser(chat.ParserOptions{InReasoning: true, Tools: weatherTools})
		h := &callHolder{}
		for rest := output; len(rest) > 0; {
			k := min(n, len(rest))
			events = append(events, h.feed(p.Feed(rest[:k]))...)
			rest = rest[k:]
		}
		return append(events, h.finish(p.Finish(), output)...)
	}
	for _, n := range []int{1, 3, 7, 64} {
		whole := run(modelToolOutput, n)
		var direct []chat.Event
		for _, step := range parsedSteps(modelToolOutput, n) {
			direct = append(direct, step...)
		}
		if c, d := chat.Collect(whole), chat.Collect(direct); len(c.ToolCalls) != 2 || c.Content != d.Content || c.ToolCalls[1].Arguments != d.ToolCalls[1].Arguments {
			t.Fatalf("pieces of %d: the whole output gives %+v, the parser %+v", n, c, d)
		}
		// Cut anywhere from just after the second call's name to just
		// before its closing tag.
		end := strings.LastIndex(modelToolOutput, "</tool_call>")
		for cut := second + len("<tool_call>\n<function=get_time>\n"); cut < end; cut++ {
			output := modelToolOutput[:cut]
			got := chat.Collect(run(output, n))
			if len(got.ToolCalls) != 1 || got.ToolCalls[0].Name != "get_weather" {
				t.Fatalf("cut at %d (pieces of %d): calls %+v", cut, n, got.ToolCalls)
			}
			if !strings.HasSuffix(got.Content, output[second:]) {
				t.Fatalf("cut at %d (pieces of %d): content %q should end with the cut call %q", cut, n, got.Content, output[second:])
			}
		}
	}
}
