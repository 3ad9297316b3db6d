package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// The parts of tokenizer.json this package reads. Anything outside the
// byte-level BPE family makes Load fail with the field named, rather than
// encode differently from the reference.
type tokenizerFile struct {
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         modelJSON        `json:"model"`
	PostProcessor json.RawMessage  `json:"post_processor"`
}

type addedTokenJSON struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

type modelJSON struct {
	Type                    string   `json:"type"`
	Dropout                 *float64 `json:"dropout"`
	UnkToken                *string  `json:"unk_token"`
	ContinuingSubwordPrefix *string  `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string  `json:"end_of_word_suffix"`
	ByteFallback            bool     `json:"byte_fallback"`
	IgnoreMerges            bool     `json:"ignore_merges"`
	// Vocab and Merges are read by jsonscan.go.
	Vocab  json.RawMessage `json:"vocab"`
	Merges json.RawMessage `json:"merges"`
}

type componentJSON struct {
	Type          string          `json:"type"`
	Normalizers   []componentJSON `json:"normalizers"`
	Pretokenizers []componentJSON `json:"pretokenizers"`
	Pattern       struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior       string `json:"behavior"`
	Invert         bool   `json:"invert"`
	AddPrefixSpace bool   `json:"add_prefix_space"`
	UseRegex       *bool  `json:"use_regex"`
}

// Load reads dir/tokenizer.json. It accepts the byte-level BPE tokenizers
// of the Qwen family (and GPT-2-style ones); for anything else it returns an
// error that names the unsupported field.
func Load(dir string) (*Tokenizer, error) {
	path := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w (the model folder must contain the tokenizer.json from the model's repository)", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return t, nil
}

// parse builds a Tokenizer from the contents of a tokenizer.json.
func parse(data []byte) (*Tokenizer, error) {
	var f tokenizerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	t := &Tokenizer{}
	if err := t.setNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.setPreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if err := checkPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if err := t.setModel(&f.Model); err != nil {
		return nil, err
	}
	if err := t.setAddedTokens(f.AddedTokens); err != nil {
		return nil, err
	}
	for _, p := range t.pieces {
		t.maxPiece = max(t.maxPiece, len(p))
	}
	return t, nil
}

func isNull(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) == 0 || string(raw) == "null"
}

func (t *Tokenizer) setNormalizer(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	parts := []componentJSON{c}
	if c.Type == "Sequence" {
		parts = c.Normalizers
	}
	for _, p := range parts {
		if p.Type != "NFC" {
			return fmt.Errorf("normalizer %q is not supported (only NFC, as in the Qwen tokenizers)", p.Type)
		}
		t.nfc = true
	}
	return nil
}

func (t *Tokenizer) setPreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("pre_tokenizer is missing; a byte-level BPE tokenizer needs a ByteLevel pre-tokenizer")
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("pre_tokenizer: %w", err)
	}
	parts := []componentJSON{c}
	if c.Type == "Sequence" {
		parts = c.Pretokenizers
	}
	byteLevel := false
	for _, p := range parts {
		switch p.Type {
		case "Split":
			if t.splitter != nil {
				return errors.New("pre_tokenizer: more than one split step is not supported")
			}
			if p.Pattern.Regex == nil {
				return errors.New("pre_tokenizer: Split needs a Regex pattern")
			}
			if p.Behavior != "Isolated" || p.Invert {
				return fmt.Errorf("pre_tokenizer: Split behavior %q (invert %v) is not supported, only Isolated", p.Behavior, p.Invert)
			}
			s, err := newSplitter(*p.Pattern.Regex)
			if err != nil {
				return fmt.Errorf("pre_tokenizer: %w", err)
			}
			t.splitter = s
		case "ByteLevel":
			if p.AddPrefixSpace {
				return errors.New("pre_tokenizer: ByteLevel with add_prefix_space is not supported")
			}
			// use_regex defaults to true: the GPT-2 split.
			if p.UseRegex == nil || *p.UseRegex {
				if t.splitter != nil {
					return errors.New("pre_tokenizer: Split followed by a ByteLevel regex is not supported")
				}
				s, err := newSplitter(gpt2Pattern)
				if err != nil {
					return err
				}
				t.splitter = s
			}
			byteLevel = true
		default:
			return fmt.Errorf("pre_tokenizer %q is not supported (only Split and ByteLevel)", p.Type)
		}
	}
	if !byteLevel {
		return errors.New("pre_tokenizer has no ByteLevel step; only byte-level BPE tokenizers are supported")
	}
	if t.splitter == nil {
		return errors.New("pre_tokenizer has no split step")
	}
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("decoder is missing; a byte-level BPE tokenizer needs the ByteLevel decoder")
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	if c.Type != "ByteLevel" {
		return fmt.Errorf("decoder %q is not supported, only ByteLevel", c.Type)
	}
	return nil
}

func checkPostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var c componentJSON
	if err := json.Unmarshal(raw, &c); err != nil {
		return fmt.Errorf("post_processor: %w", err)
	}
	// ByteLevel post-processing only adjusts offsets, which we do not report.
	if c.Type != "ByteLevel" {
		return fmt.Errorf("post_processor %q is not supported (it would add tokens around the text)", c.Type)
	}
	return nil
}

func (t *Tokenizer) setModel(m *modelJSON) error {
	if m.Type != "BPE" {
		return fmt.Errorf("model.type %q is not supported, only BPE", m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return errors.New("model.dropout is set; BPE dropout is for training and is not supported")
	}
	if m.ByteFallback {
		return errors.New("model.byte_fallback is not supported (byte-level BPE does not need it)")
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return errors.New("model.continuing_subword_prefix is not supported")
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return errors.New("model.end_of_word_suffix is not supported")
	}
	vocab, err := parseVocab(m.Vocab)
	if err != nil {
		return fmt.Errorf("model.vocab: %w", err)
	}
	if len(vocab) == 0 {
		return errors.New("model.vocab is empty")
	}

	maxID := 0
	for s, id := range vocab {
		if id < 0 {
			return fmt.Errorf("model.vocab has negative id %d", id)
		}
		if id > maxTokenID {
			return fmt.Errorf("model.vocab: %q has id %d, beyond %d: the file is corrupt or not a language model's vocabulary", s, id, maxTokenID)
		}
		maxID = max(maxID, id)
	}
	t.pieces = make([][]byte, maxID+1)
	t.vocab = vocab
	for s, id := range vocab {
		b, _ := byteLevelToBytes(s)
		t.pieces[id] = b
	}
	for b := 0; b < 256; b++ {
		id, ok := vocab[string(byteToRune[b])]
		if !ok {
			return fmt.Errorf("model.vocab has no token for byte 0x%02X (%q); a byte-level vocabulary must cover all 256 bytes", b, string(byteToRune[b]))
		}
		t.bpe.byteIDs[b] = int32(id)
	}
	t.ignoreMerges = m.IgnoreMerges

	pairs, err := parseMerges(m.Merges)
	if err != nil {
		return fmt.Errorf("model.merges: %w", err)
	}
	t.bpe.merges = make(map[uint64]uint64, len(pairs))
	t.bpe.cache = make(map[string][]int32)
	var joined []byte
	for rank, p := range pairs {
		a, okA := vocab[p[0]]
		b, okB := vocab[p[1]]
		joined = append(append(joined[:0], p[0]...), p[1]...)
		c, okC := vocab[string(joined)]
		if !okA || !okB || !okC {
			return fmt.Errorf("model.merges[%d] (%q %q) uses a token missing from model.vocab", rank, p[0], p[1])
		}
		key := pairKey(int32(a), int32(b))
		if _, dup := t.bpe.merges[key]; dup {
			// The first (lowest-ranked) occurrence wins, as in the reference.
			continue
		}
		t.bpe.merges[key] = uint64(rank)<<32 | uint64(uint32(c))
	}
	return nil
}

// maxTokenID bounds the ids a tokenizer.json may use. Ids index a table
// that is allocated up front, so an absurd id in a corrupt file must be an
// error rather than an allocation of gigabytes; real vocabularies stay
// below 300,000, and ids are int32 inside the BPE.
const maxTokenID = 1<<22 - 1

func (t *Tokenizer) setAddedTokens(list []addedTokenJSON) error {
	t.added = make(map[string]addedToken, len(list))
	t.special = make(map[int]bool)
	maxID := len(t.pieces) - 1
	for _, a := range list {
		// Checked before the id table grows to the largest id.
		if a.ID > maxTokenID {
			return fmt.Errorf("added_tokens: %q has id %d, beyond %d: the file is corrupt", a.Content, a.ID, maxTokenID)
		}
		maxID = max(maxID, a.ID)
	}
	if maxID >= len(t.pieces) {
		grown := make([][]byte, maxID+1)
		copy(grown, t.pieces)
		t.pieces = grown
	}
	for _, a := range list {
		if a.Content == "" {
			return fmt.Errorf("added_tokens: token %d has empty content", a.ID)
		}
		if a.SingleWord || a.LStrip || a.RStrip {
			return fmt.Errorf("added_tokens: %q uses single_word/lstrip/rstrip, which are not supported", a.Content)
		}
		if a.ID < 0 {
			return fmt.Errorf("added_tokens: %q has negative id %d", a.Content, a.ID)
		}
		// Added tokens decode to their own text, not through the byte
		// alphabet.
		t.pieces[a.ID] = []byte(a.Content)
		t.added[a.Content] = addedToken{id: a.ID, special: a.Special, normalized: a.Normalized}
		if a.Special {
			t.special[a.ID] = true
		}
	}
	t.matchers[0] = newAddedMatcher(t.added, false, false)
	t.matchers[1] = newAddedMatcher(t.added, false, true)
	t.matchers[2] = newAddedMatcher(t.added, true, false)
	t.matchers[3] = newAddedMatcher(t.added, true, true)
	return nil
}

// addedMatcher finds added tokens in text, leftmost first and longest at a
// position, like the Aho-Corasick LeftmostLongest search of the reference.
type addedMatcher struct {
	// byFirst lists the candidate tokens for each first byte, longest first.
	byFirst [256][]addedCandidate
	any     bool
}

type addedCandidate struct {
	content string
	id      int
}

func newAddedMatcher(added map[string]addedToken, normalized, withSpecial bool) *addedMatcher {
	m := &addedMatcher{}
	for content, a := range added {
		if a.normalized != normalized || (a.special && !withSpecial) {
			continue
		}
		m.byFirst[content[0]] = append(m.byFirst[content[0]], addedCandidate{content: content, id: a.id})
		m.any = true
	}
	for i := range m.byFirst {
		c := m.byFirst[i]
		sort.Slice(c, func(a, b int) bool {
			if len(c[a].content) != len(c[b].content) {
				return len(c[a].content) > len(c[b].content)
			}
			return c[a].content < c[b].content
		})
	}
	return m
}

// find returns the first added token in s at or after from: its start and
// end offsets and id, or start -1.
func (m *addedMatcher) find(s string, from int) (start, end, id int) {
	if !m.any {
		return -1, 0, 0
	}
	for i := from; i < len(s); i++ {
		for _, c := range m.byFirst[s[i]] {
			if strings.HasPrefix(s[i:], c.content) {
				return i, i + len(c.content), c.id
			}
		}
	}
	return -1, 0, 0
}
