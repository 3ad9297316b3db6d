package chat

import (
	"os"
	"path/filepath"

	"github.com/suzuran-app/suzuran/engine/tokenizer"
)

type tokenizerT = *tokenizer.Tokenizer

func writeFile(dir, name string, data []byte) error {
	return os.WriteFile(filepath.Join(dir, name), data, 0o644)
}
