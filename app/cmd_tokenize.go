package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

func newTokenizeCmd() *cobra.Command {
	var (
		dir      string
		decode   bool
		specials bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize [--model DIR] [--decode]",
		Short: "Turn text on stdin into token ids (or ids back into text) with a model's tokenizer",
		Long: `tokenize reads text on stdin and writes its token ids as a JSON array.
Special tokens written in the text (<|im_start|>, <|im_end|>) become the
control tokens, as in Hugging Face's tokenizer.encode, so that the output of
"suzuran render" tokenizes to the model's prompt; --specials=false encodes them
as plain text instead, as the server does with user messages.

With --decode it reads a JSON array of ids and writes their text exactly,
without an added newline.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			modelDir, err := commandModel(cmd, dir)
			if err != nil {
				return err
			}
			tok, err := tokenizer.Load(modelDir)
			if err != nil {
				return err
			}
			in, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
			out := cmd.OutOrStdout()
			if decode {
				var ids []int
				if err := json.Unmarshal(in, &ids); err != nil {
					return fmt.Errorf("stdin is not a JSON array of token ids: %w", err)
				}
				for i, id := range ids {
					if id < 0 || id >= tok.VocabSize() {
						return fmt.Errorf("id %d at position %d is outside the vocabulary (0..%d)", id, i, tok.VocabSize()-1)
					}
				}
				_, err = io.WriteString(out, tok.Decode(ids))
				return err
			}
			var ids []int
			if specials {
				ids = tok.EncodeWithSpecials(string(in))
			} else {
				ids = tok.Encode(string(in))
			}
			data, err := json.Marshal(ids)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s\n", data)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&dir, "model", "", "model folder (holding tokenizer.json; default: the configured model, else the demo model)")
	f.BoolVar(&decode, "decode", false, "read JSON ids and write their text")
	f.BoolVar(&specials, "specials", true, "recognise special tokens written in the text")
	return cmd
}
