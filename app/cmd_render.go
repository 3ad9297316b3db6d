package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/suzuran-app/suzuran/engine/chat"
)

func newRenderCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "render [--model DIR]",
		Short: "Render a conversation with a model's chat template",
		Long: `render reads a JSON object on stdin,

  {"messages": [...], "tools": [...], "add_generation_prompt": true,
   "enable_thinking": false, "preserve_thinking": false}

and writes the prompt the model's chat template makes of it, exactly, with
no newline added. Messages and tools are those of the OpenAI chat API;
object keys keep their order, as they do in transformers.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			modelDir, err := commandModel(cmd, dir)
			if err != nil {
				return err
			}
			tmpl, err := chat.LoadTemplate(modelDir)
			if err != nil {
				return err
			}
			in, err := io.ReadAll(cmd.InOrStdin())
			if err != nil {
				return fmt.Errorf("reading stdin: %w", err)
			}
			req, err := chat.DecodeRenderRequest(in)
			if err != nil {
				return err
			}
			text, err := tmpl.Render(req)
			if err != nil {
				return err
			}
			_, err = io.WriteString(cmd.OutOrStdout(), text)
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "model", "", "model folder (holding chat_template.jinja or tokenizer_config.json; default: the configured model, else the demo model)")
	return cmd
}
