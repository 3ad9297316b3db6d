package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"
	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/app/modelhost"
	"github.com/suzuran-app/suzuran/assets/models"
	"github.com/suzuran-app/suzuran/engine"
	"github.com/suzuran-app/suzuran/engine/chat"
	"github.com/suzuran-app/suzuran/engine/gpucheck"
	"github.com/suzuran-app/suzuran/engine/imageproc"
	"github.com/suzuran-app/suzuran/engine/model"
	"github.com/suzuran-app/suzuran/engine/sample"
)

// chatOptions are the flags of `suzuran chat`.
type chatOptions struct {
	model, backend, think, system string
	precision                     string
	temperature                   float64
	temperatureSet                bool
	maxTokens, threads, parallel  int
	images                        []string
}

func newChatCmd() *cobra.Command {
	var o chatOptions
	cmd := &cobra.Command{
		Use:   "chat [--model DIR] [--backend " + backendChoices() + "] [--think on|off] [--temperature T] [--max-tokens N] [--system TEXT] [--image FILE…]",
		Short: "Chat with the model in the terminal",
		Long: `chat is a terminal chat on the engine. Answers stream as they are generated,
thinking shown dimmed; after each answer the prefill and decode speeds are
shown, and how many prompt tokens were computed (a conversation's next turn
reuses the cached prefix and computes only its new tokens).

At the prompt: /reset starts a new conversation, /think on|off switches
thinking. Ctrl-C stops an answer; a second Ctrl-C (at the prompt, or within
a second of the first) quits, as does Ctrl-D.

When standard input is not a terminal, every line is one message and each
answer is printed followed by an empty line; statistics go to stderr.

Sampling follows the model card: with thinking, temperature 1.0, top-p 0.95,
top-k 20, presence penalty 1.5; without, temperature 0.7, top-p 0.8, top-k 20,
presence penalty 1.5. --temperature replaces the temperature; --temperature 0
is plain greedy decoding (no penalties), reproducible token for token.

--think defaults to on, except for the demo model Suzuran Tiny, which was
trained without thinking and always answers with thinking off.

On a terminal, a long prompt shows how far it has been read.

--image attaches image files (PNG, JPEG, GIF, WebP, BMP, TIFF) to the first
message, before its text, each at most 1,310,720 pixels as the model sees
it (about 1,280 tokens); each image's size and token cost is shown first.
A model without a vision tower refuses them.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.temperatureSet = cmd.Flags().Changed("temperature")
			return runChat(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.model, "model", "", "model folder (default: the configured model, else the demo model)")
	f.StringVar(&o.backend, "backend", defaultBackend(), "backend to run on: "+strings.Join(engine.Backends(), ", "))
	f.StringVar(&o.think, "think", "", "thinking: on or off (default on; off for the demo model)")
	f.Float64Var(&o.temperature, "temperature", 0, "sampling temperature; 0 is greedy (default: the model card's)")
	f.IntVar(&o.maxTokens, "max-tokens", 0, "most tokens per answer (default: as many as the context holds)")
	f.StringVar(&o.system, "system", "", "system message")
	f.StringSliceVar(&o.images, "image", nil, "image files sent with the first message (repeat the flag or separate with commas)")
	f.IntVar(&o.threads, "threads", 0, "CPU threads (0: all cores)")
	addPrecisionFlag(cmd, &o.precision)
	f.IntVar(&o.parallel, "parallel", 0, "requests decoded together in one batched step (0: 4 on a GPU, 2 on cpu)")
	return cmd
}

func runChat(cmd *cobra.Command, o chatOptions) error {
	stdin, stdout, stderr := cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr()
	if o.temperatureSet {
		if err := sample.Validate(&model.Sampling{Temperature: float32(o.temperature)}); err != nil {
			return fmt.Errorf("--%w", err)
		}
	}
	if o.maxTokens < 0 {
		return fmt.Errorf("--max-tokens %d: must be positive", o.maxTokens)
	}
	if err := checkThreads(o.threads); err != nil {
		return err
	}
	switch o.think {
	case "", "on", "off":
	default:
		return fmt.Errorf("--think %q: use on or off", o.think)
	}
	if err := checkBackend(o.backend); err != nil {
		return err
	}
	if err := checkPrecision(cmd, o.backend, o.precision); err != nil {
		return err
	}
	dir, err := commandModel(cmd, o.model)
	if err != nil {
		return err
	}
	// Thinking is on by default, as the model card has it, but not on a
	// model that cannot think (modelhost.Capabilities: the demo model).
	demo := modelhost.IsDemo(dir)
	think := o.think == "on" || (o.think == "" && modelhost.CapabilitiesOf(dir).Thinking)
	if think && !modelhost.Think(dir, think) {
		fmt.Fprintln(stderr, demoThinkNote)
		think = false
	}

	images, err := chatImages(dir, o.images, stderr)
	if err != nil {
		return err
	}

	// The GPU is checked as the window checks it, and a failure moves the
	// chat to the CPU, saying why.
	check := gpuCheckOptions(o.backend, zerolog.Nop())
	check.OnFallback = func(r gpucheck.Result) { fmt.Fprintln(stderr, r.Message) }
	prefix := openPrefixStore(func(msg string) { fmt.Fprintln(stderr, msg) })
	if prefix != nil {
		defer prefix.Close()
	}
	e, res, err := gpucheck.Load(dir, engine.LoadOptions{Backend: o.backend, Threads: o.threads, Parallel: o.parallel, Precision: o.precision,
		Store: prefix}, check)
	if err != nil {
		return err
	}
	if res.Fallback {
		fmt.Fprintln(stderr, res.Message)
	}
	if _, err := e.Template(); err != nil {
		e.Close()
		return fmt.Errorf("%s cannot chat: %w", dir, err)
	}
	if err := checkMaxTokens(o.maxTokens, e.ContextTokens()); err != nil {
		e.Close()
		return err
	}
	if len(images) > 0 && e.Config().Vision == nil {
		e.Close()
		return fmt.Errorf("--image: %v: the model in %s has no vision tower; chat without --image, or choose a model that reads images (Qwen3.6)", engine.ErrNoVision, dir)
	}

	s := &chatSession{
		engine:    e,
		opts:      o,
		think:     think,
		demo:      demo,
		out:       stdout,
		errOut:    stderr,
		color:     isTerminal(stdout),
		statColor: isTerminal(stderr),
		pending:   images,
	}
	defer func() {
		if !s.abandoned {
			e.Close()
		}
	}()
	if isTerminal(stdin) {
		return s.interactive(stdin)
	}
	return s.script(stdin)
}

// defaultBackend is Metal where this build has it (macOS), else the CPU.
func defaultBackend() string {
	if slices.Contains(engine.Backends(), "metal") {
		return "metal"
	}
	return "cpu"
}

// isTerminal reports whether w (or r) is a terminal.
func isTerminal(v any) bool {
	f, ok := v.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// ANSI styles for a terminal.
const (
	ansiDim   = "\x1b[2m"
	ansiReset = "\x1b[0m"
)

// chatSession is one conversation in the terminal.
type chatSession struct {
	engine  *engine.Engine
	opts    chatOptions
	think   bool
	demo    bool // the demo model, which never thinks
	history []chat.Message
	// images are the images of the conversation, as ImagePart.Index
	// numbers them; pending are those the next message takes (--image,
	// for the first).
	images    []model.Image
	pending   []chatImage
	out       io.Writer // answers
	errOut    io.Writer // prompts, notes, statistics
	color     bool      // out is a terminal: dim the thinking
	statColor bool      // errOut is a terminal
	// lastFinish is the finish reason of the last answer; interrupted is
	// set when Ctrl-C was pressed during it.
	lastFinish  string
	interrupted bool
	// abandoned is set when the user quit while a request was still
	// running: the engine is then left to the process's exit instead of
	// being waited for.
	abandoned bool
}

// sampling is the model card's defaults for the current thinking mode,
// with --temperature applied; temperature 0 is plain greedy.
func (s *chatSession) sampling() model.Sampling {
	p := sample.ModelCardDefaults(s.think)
	if s.opts.temperatureSet {
		p.Temperature = float32(s.opts.temperature)
		if p.Temperature == 0 {
			return model.Sampling{}
		}
	}
	return p
}

// request is the conversation so far, for the next answer.
func (s *chatSession) request() engine.TurnRequest {
	var msgs []chat.Message
	if s.opts.system != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: s.opts.system})
	}
	msgs = append(msgs, s.history...)
	think := s.think
	return engine.TurnRequest{
		Render: chat.RenderRequest{
			Messages:            msgs,
			AddGenerationPrompt: true,
			EnableThinking:      &think,
		},
		Images:    s.images,
		Sampling:  s.sampling(),
		MaxTokens: s.opts.maxTokens,
	}
}

// reply is one answer as it was shown.
type reply struct {
	reasoning, content strings.Builder
	stats              engine.Stats
}

// ask sends message and streams the answer. interrupt, when it delivers,
// stops the answer; ask returns whether a second interrupt asked to quit.
func (s *chatSession) ask(message string, interrupt <-chan os.Signal) (quit bool, err error) {
	var content any = message
	nImages := len(s.images)
	if len(s.pending) > 0 {
		var parts []any
		for _, im := range s.pending {
			parts = append(parts, chat.ImagePart{Index: len(s.images), Tokens: im.tokens})
			s.images = append(s.images, im.image)
		}
		text := chat.NewObject()
		text.Set("type", "text")
		text.Set("text", message)
		content = append(parts, text)
	}
	s.history = append(s.history, chat.Message{Role: "user", Content: content})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	turn, err := s.engine.StartTurn(ctx, s.request())
	if err != nil {
		s.history = s.history[:len(s.history)-1]
		s.images = s.images[:nImages]
		return false, err
	}
	s.pending = nil
	var r reply
	w := &replyWriter{s: s, r: &r}
	quit, abandoned := w.stream(turn, cancel, interrupt)
	if abandoned {
		return true, nil
	}
	res := turn.Result()
	r.stats = res.Stats
	if res.Err != nil {
		return quit, res.Err
	}
	reasoning := strings.TrimSpace(r.reasoning.String())
	answer := chat.Message{Role: "assistant", Content: strings.TrimSpace(r.content.String())}
	if reasoning != "" {
		answer.ReasoningContent = &reasoning
	}
	s.history = append(s.history, answer)
	s.lastFinish = r.stats.FinishReason
	if r.stats.FinishReason == engine.FinishCancelled {
		s.note("[stopped]")
	}
	s.note(statsLine(&r.stats))
	return quit, nil
}

// stream shows the turn's events until its end. A first interrupt
// cancels the answer; a second within a second quits at once (abandoned),
// without waiting for the engine to notice: a GPU pass already sent to the
// device runs to its end.
func (w *replyWriter) stream(turn *engine.Turn, cancel context.CancelFunc, interrupt <-chan os.Signal) (quit, abandoned bool) {
	s := w.s
	shown := false // a progress line is on the terminal
	var stoppedAt time.Time
	for events := turn.Events; events != nil; {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				events = nil
			case ev.Progress != nil:
				// Only a prompt that takes more than one pass is worth a
				// line; the first answer token clears it.
				if p := *ev.Progress; s.statColor && p.Total-p.Cached > progressMinTokens && p.Done < p.Total-1 {
					fmt.Fprintf(s.errOut, "%s%s%s%s", clearLine, ansiDim, prefillLine(p), ansiReset)
					shown = true
				}
			case ev.QueuePosition == nil:
				if shown {
					fmt.Fprint(s.errOut, clearLine)
					shown = false
				}
				w.show(ev.Parsed)
				w.show(ev.Closing)
			}
		case <-interrupt:
			cancel()
			if !stoppedAt.IsZero() && time.Since(stoppedAt) < time.Second {
				w.end()
				s.abandoned = true
				return true, true
			}
			stoppedAt = time.Now()
		}
	}
	// A Ctrl-C that came as the stream was closing still counts: a second
	// one quits, a first one arms the next (see interactive).
	select {
	case <-interrupt:
		quit = !stoppedAt.IsZero()
		stoppedAt = time.Now()
	default:
	}
	s.interrupted = !stoppedAt.IsZero()
	w.end()
	return quit, false
}

// replyWriter prints parser events: reasoning dimmed on a terminal (to
// stderr when stdout is not one, so that stdout holds only answers), the
// answer plainly.
type replyWriter struct {
	s            *chatSession
	r            *reply
	inReasoning  bool
	wroteContent bool
	lastByte     byte
	// errOpen is set while reasoning written to stderr lacks its final
	// newline.
	errOpen bool
}

func (w *replyWriter) show(events []chat.Event) {
	for _, ev := range events {
		switch ev.Kind {
		case chat.ReasoningDelta:
			w.r.reasoning.WriteString(ev.Text)
			if w.s.color {
				if !w.inReasoning {
					io.WriteString(w.s.out, ansiDim)
					w.inReasoning = true
				}
				w.write(w.s.out, ev.Text)
			} else if ev.Text != "" {
				io.WriteString(w.s.errOut, ev.Text)
				w.errOpen = !strings.HasSuffix(ev.Text, "\n")
			}
		case chat.ContentDelta, chat.ToolCallArguments:
			w.leaveReasoning()
			w.r.content.WriteString(ev.Text)
			w.write(w.s.out, ev.Text)
			w.wroteContent = true
		case chat.ToolCallStart:
			w.leaveReasoning()
			w.write(w.s.out, fmt.Sprintf("[tool call %s] ", ev.Name))
		}
	}
}

func (w *replyWriter) write(out io.Writer, text string) {
	if text != "" {
		io.WriteString(out, text)
		w.lastByte = text[len(text)-1]
	}
}

// leaveReasoning closes the dimmed block and separates it from the answer.
func (w *replyWriter) leaveReasoning() {
	if !w.inReasoning {
		return
	}
	w.inReasoning = false
	io.WriteString(w.s.out, ansiReset)
	if w.lastByte != '\n' {
		io.WriteString(w.s.out, "\n")
	}
	io.WriteString(w.s.out, "\n")
	w.lastByte = '\n'
}

// end finishes the answer: a newline, then the empty line that separates
// answers.
func (w *replyWriter) end() {
	if w.errOpen {
		io.WriteString(w.s.errOut, "\n")
		w.errOpen = false
	}
	if w.inReasoning {
		io.WriteString(w.s.out, ansiReset)
		w.inReasoning = false
	}
	if w.lastByte != '\n' && (w.wroteContent || w.s.color) {
		io.WriteString(w.s.out, "\n")
	}
	io.WriteString(w.s.out, "\n")
}

// note prints a line to stderr, dimmed on a terminal.
func (s *chatSession) note(line string) {
	if s.statColor {
		fmt.Fprintf(s.errOut, "%s%s%s\n", ansiDim, line, ansiReset)
		return
	}
	fmt.Fprintln(s.errOut, line)
}

// statsLine is the line shown after each answer.
func statsLine(st *engine.Stats) string {
	prefill := "prefill " + plural(st.PrefilledTokens, "token")
	if st.CachedTokens > 0 {
		prefill += fmt.Sprintf(" (%d more from the cache)", st.CachedTokens)
	}
	prefill += fmt.Sprintf(" at %.1f tok/s", st.PrefillTokensPerSecond())
	if st.ImagesEncoded > 0 {
		prefill += ", " + plural(st.ImagesEncoded, "image") + " encoded"
	}
	decode := "decode " + plural(st.GeneratedTokens, "token")
	if st.GeneratedTokens > 1 {
		decode += fmt.Sprintf(" at %.1f tok/s", st.DecodeTokensPerSecond())
	}
	return fmt.Sprintf("[%s · %s · %s]", prefill, decode, st.FinishReason)
}

// command handles a line starting with "/"; it reports whether the line was
// one.
func (s *chatSession) command(line string) bool {
	fields := strings.Fields(line)
	if len(fields) == 0 || !strings.HasPrefix(fields[0], "/") {
		return false
	}
	switch {
	case fields[0] == "/reset" && len(fields) == 1:
		s.history, s.images = nil, nil
		s.note("[new conversation]")
	case fields[0] == "/think" && len(fields) == 2 && fields[1] == "on" && s.demo:
		s.note(demoThinkNote)
	case fields[0] == "/think" && len(fields) == 2 && (fields[1] == "on" || fields[1] == "off"):
		s.think = fields[1] == "on"
		s.note("[thinking " + fields[1] + "]")
	default:
		s.note("commands: /reset, /think on|off; Ctrl-C stops an answer, twice quits")
	}
	return true
}

// script answers one message per line of r until it ends.
func (s *chatSession) script(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || s.command(line) {
			continue
		}
		if _, err := s.ask(line, nil); err != nil {
			return err
		}
	}
	return sc.Err()
}

// interactive runs the terminal chat with prompts and Ctrl-C handling.
func (s *chatSession) interactive(r io.Reader) error {
	interrupt := make(chan os.Signal, 1)
	signal.Notify(interrupt, os.Interrupt)
	defer signal.Stop(interrupt)

	lines := make(chan string)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 16<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
		readErr <- sc.Err()
		close(lines)
	}()

	mode := "off"
	if s.think {
		mode = "on"
	}
	s.note(fmt.Sprintf("%s on %s, thinking %s. /reset, /think on|off; Ctrl-C stops an answer, twice quits.",
		modelLabel(s.engine.Dir()), s.engine.BackendName(), mode))
	armed := false // a Ctrl-C was just pressed: the next one quits
	for {
		fmt.Fprint(s.errOut, "> ")
		var line string
		select {
		case l, ok := <-lines:
			if !ok {
				fmt.Fprintln(s.errOut)
				return <-readErr
			}
			line = strings.TrimSpace(l)
		case <-interrupt:
			fmt.Fprintln(s.errOut)
			if armed {
				return nil
			}
			armed = true
			s.note("(Ctrl-C again or Ctrl-D to quit)")
			continue
		}
		if line == "" || s.command(line) {
			continue
		}
		armed = false
		quit, err := s.ask(line, interrupt)
		if err != nil {
			s.note("error: " + err.Error())
			continue
		}
		if quit {
			return nil
		}
		// A Ctrl-C during the answer arms the next one, at the prompt.
		armed = s.interrupted
	}
}

// modelLabel names the model folder for the banner.
func modelLabel(dir string) string {
	if modelhost.IsDemo(dir) {
		return models.DemoName + " (demo)"
	}
	return dir
}

// demoThinkNote says why the demo model answers without thinking.
const demoThinkNote = "the demo model " + models.DemoName + " was trained without thinking, so it answers with thinking off"

// progressMinTokens is the prompt length (tokens to compute) from which a
// terminal shows how far the prompt has been read: shorter prompts take
// one pass and show their answer at once.
const progressMinTokens = 512

// clearLine returns the cursor to the start of the line and erases it.
const clearLine = "\r\x1b[2K"

// prefillLine is "Reading 18,012 tokens… 40 %".
func prefillLine(p engine.PrefillProgress) string {
	todo := p.Total - p.Cached
	pct := 0
	if todo > 0 {
		pct = 100 * (p.Done - p.Cached) / todo
	}
	return fmt.Sprintf("Reading %s tokens… %d %%", thousands(todo), pct)
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string { return docs.Thousands(n) }

// chatImage is an image file read for the chat: the tower's pixels and its
// token cost.
type chatImage struct {
	image  model.Image
	tokens int
}

// chatImages reads --image files through the model's image processor (at
// the window's default size limit), saying each one's size and cost.
func chatImages(dir string, files []string, notes io.Writer) ([]chatImage, error) {
	if len(files) == 0 {
		return nil, nil
	}
	cfg, err := imageproc.LoadConfig(dir)
	if err != nil {
		return nil, fmt.Errorf("--image: %w", err)
	}
	cfg = cfg.WithMaxPixels(imageproc.DefaultMaxPixels)
	var out []chatImage
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("--image: %w", err)
		}
		if len(data) > imageproc.MaxFileBytes {
			return nil, fmt.Errorf("--image %s: the file is larger than the %d MB an image may be: export a smaller copy", f, imageproc.MaxFileBytes>>20)
		}
		img, info, err := imageproc.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("--image %s: %w", f, err)
		}
		px, err := cfg.Process(img)
		if err != nil {
			return nil, fmt.Errorf("--image %s: %w", f, err)
		}
		note := ""
		if info.Note != "" {
			note = " (" + info.Note + ")"
		}
		fmt.Fprintf(notes, "%s: %d × %d, seen at %d × %d, %s%s\n", f, info.Width, info.Height, px.Width, px.Height, plural(px.Tokens, "token"), note)
		out = append(out, chatImage{image: model.Image{Pixels: px.Values, Grid: px.Grid, Hash: sha256.Sum256(data)}, tokens: px.Tokens})
	}
	return out, nil
}
