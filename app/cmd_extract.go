package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/app/docs"
	"github.com/suzuran-app/suzuran/app/internal/bytesize"
	"github.com/suzuran-app/suzuran/engine/imageproc"
	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

// extractOutput is what --json prints.
type extractOutput struct {
	Attachments []docs.Attachment `json:"attachments"`
	// BlockTokens counts the whole document block as the prompt holds it.
	BlockTokens int `json:"block_tokens"`
	// Images are the image files, with their token cost.
	Images []imageRecord `json:"images,omitempty"`
	// Errors name the files that could not be read, and why.
	Errors []string `json:"errors,omitempty"`
}

// extractOptions are extract's flags.
type extractOptions struct {
	dir      string
	asJSON   bool
	maxBytes int64
	maxPages int
	maxChars int
	maxToks  int
	maxPix   int
	timeout  time.Duration
}

func newExtractCmd() *cobra.Command {
	o := &extractOptions{}
	cmd := &cobra.Command{
		Use:   "extract FILE... [--json] [--model DIR]",
		Short: "Print the text the model reads from documents, with its tokens and pages",
		Long: `extract reads documents the way the chat window does when they are dropped
on it, and prints on stdout the document block the model would read before the
question. On stderr it lists each file with its type, size, pages and tokens
(counted with the model's tokenizer). With --json it prints instead, on stdout,
the attachment records a conversation stores (text, name, size, SHA-256, pages,
tokens) and the block's token count.

Formats: text, Markdown, source code, CSV/TSV, JSON, HTML, PDF, DOCX, XLSX,
EPUB and RTF. Images (PNG, JPEG, GIF, WebP, BMP, TIFF) are listed on stderr
with their size, the size the model sees them at and their token cost (in
--json, as "images"); they are not part of the document block. A file that
cannot be read is reported, and the others are still
printed; the command then exits with an error. Only regular files are read: a
folder, a device, a named pipe or a socket is refused without being opened.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return o.run(cmd, args) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "model", "", "model folder whose tokenizer counts the tokens (default: the configured model, else the demo model)")
	f.BoolVar(&o.asJSON, "json", false, "print the attachment records as JSON")
	f.Int64Var(&o.maxBytes, "max-bytes", 0, fmt.Sprintf("largest file read, in bytes (default %d)", docs.DefaultMaxBytes))
	f.IntVar(&o.maxPages, "max-pages", 0, fmt.Sprintf("most PDF pages, XLSX sheets or EPUB chapters (default %d)", docs.DefaultMaxPages))
	f.IntVar(&o.maxChars, "max-chars", 0, fmt.Sprintf("most characters of text one file may give (default %d)", docs.DefaultMaxChars))
	f.IntVar(&o.maxToks, "max-tokens", 0, fmt.Sprintf("most tokens of text one file may give (default %d)", docs.DefaultMaxTokens))
	f.IntVar(&o.maxPix, "max-pixels", imageproc.DefaultMaxPixels, "largest image the model sees, in pixels (its token cost is a 32 × 32 pixel square a token)")
	f.DurationVar(&o.timeout, "timeout", 0, fmt.Sprintf("longest time one file may take, opening it included (default %v)", docs.DefaultTimeout))
	return cmd
}

// run reads each file of args, printing what the model would read.
func (o *extractOptions) run(cmd *cobra.Command, args []string) error {
	modelDir, err := commandModel(cmd, o.dir)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(modelDir)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
	defer stop()
	opts := docs.Options{Limits: docs.Limits{MaxBytes: o.maxBytes, MaxPages: o.maxPages, Timeout: o.timeout, MaxChars: o.maxChars, MaxTokens: o.maxToks}}
	stderr := cmd.ErrOrStderr()
	var out extractOutput
	var imageCfg *imageproc.Config
	for _, path := range args {
		if isImageFile(path) {
			if imageCfg == nil {
				cfg, note := imageProcessor(modelDir, o.maxPix)
				if note != "" {
					fmt.Fprintln(stderr, note)
				}
				imageCfg = &cfg
			}
			rec, err := extractImage(path, *imageCfg)
			if err != nil {
				fmt.Fprintln(stderr, err)
				out.Errors = append(out.Errors, err.Error())
				continue
			}
			out.Images = append(out.Images, rec)
			if !o.asJSON {
				fmt.Fprintln(stderr, describeImage(rec))
			}
			continue
		}
		progress := newProgressLine(stderr)
		opts.Progress = progress.extraction
		att, err := extractOne(ctx, path, tok, opts, progress)
		progress.clear()
		if err != nil {
			fmt.Fprintln(stderr, err)
			out.Errors = append(out.Errors, err.Error())
			if ctx.Err() != nil {
				break
			}
			continue
		}
		out.Attachments = append(out.Attachments, att)
		if !o.asJSON {
			fmt.Fprintln(stderr, describe(att))
		}
	}
	if len(out.Attachments) > 0 {
		out.BlockTokens = len(tok.Encode(docs.DocumentBlock(out.Attachments) + "\n\n"))
	}
	if err := printExtract(cmd.OutOrStdout(), stderr, out, o.asJSON); err != nil {
		return err
	}
	if len(out.Errors) > 0 {
		return fmt.Errorf("%d of %d files could not be read", len(out.Errors), len(args))
	}
	return nil
}

// extractOne reads one file and counts its tokens.
func extractOne(ctx context.Context, path string, tok *tokenizer.Tokenizer, opts docs.Options, progress *progressLine) (docs.Attachment, error) {
	doc, err := docs.ExtractFile(ctx, path, opts)
	if err != nil {
		return docs.Attachment{}, err
	}
	return docs.NewAttachment(ctx, doc, tok, progress.counting(doc.Name))
}

// describe is the line that lists an attachment on stderr, as its chip in
// the window would: name, type, size, pages, tokens.
func describe(a docs.Attachment) string {
	s := fmt.Sprintf("%s: %s, %s", a.Name, a.Type, bytesize.Format(a.Size))
	if a.Pages > 0 {
		unit := a.PageUnit
		if a.Pages == 1 {
			unit = strings.TrimSuffix(unit, "s")
		}
		s += fmt.Sprintf(", %d %s", a.Pages, unit)
	}
	if a.Encoding != "" && a.Encoding != "UTF-8" {
		s += ", " + a.Encoding
	}
	s += fmt.Sprintf(", %d tokens", a.Tokens)
	for _, n := range a.Notes {
		s += "\n  note: " + n
	}
	return s
}

func printExtract(stdout, stderr io.Writer, out extractOutput, asJSON bool) error {
	if asJSON {
		if out.Attachments == nil {
			out.Attachments = []docs.Attachment{}
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(out.Attachments) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(stdout, docs.DocumentBlock(out.Attachments)); err != nil {
		return err
	}
	_, err := fmt.Fprintf(stderr, "document block: %d tokens\n", out.BlockTokens)
	return err
}

// progressLine shows the progress of a large file on one terminal line,
// at most a few times a second; on anything but a terminal it is silent.
type progressLine struct {
	w     io.Writer
	on    bool
	last  time.Time
	shown bool
}

func newProgressLine(w io.Writer) *progressLine {
	return &progressLine{w: w, on: isTerminal(w)}
}

func (p *progressLine) show(format string, args ...any) {
	if !p.on || time.Since(p.last) < 200*time.Millisecond {
		return
	}
	p.last = time.Now()
	p.shown = true
	fmt.Fprintf(p.w, "\r\033[K"+format, args...)
}

func (p *progressLine) extraction(pr docs.Progress) {
	if pr.Total > 0 {
		p.show("%s: %s %d%%", pr.Name, pr.Stage, 100*pr.Done/pr.Total)
	} else {
		p.show("%s: %s %d %s", pr.Name, pr.Stage, pr.Done, pr.Unit)
	}
}

func (p *progressLine) counting(name string) func(done, total int64) {
	return func(done, total int64) {
		if total > 0 {
			p.show("%s: counting tokens %d%%", name, 100*done/total)
		}
	}
}

func (p *progressLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\033[K")
	}
}
