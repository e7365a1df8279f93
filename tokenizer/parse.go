package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// fileJSON holds the top-level members of tokenizer.json other than the model. Components
// stay raw until their "type" says how to read them; truncation, padding and post_processor
// do not affect plain encoding and are skipped.
type fileJSON struct {
	Version      json.RawMessage
	AddedTokens  json.RawMessage
	Normalizer   json.RawMessage
	PreTokenizer json.RawMessage
	Decoder      json.RawMessage
	Model        *bpeModel
	HasModel     bool
}

type addedTokenJSON struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized *bool  `json:"normalized"`
	Special    bool   `json:"special"`
}

// patternJSON is {"String": "..."} or {"Regex": "..."}.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

// Ids are int32 throughout (the model side wants int32 tensors); a larger id is refused.
const maxID = 1<<31 - 1

// Parse builds a Tokenizer from the bytes of a tokenizer.json.
func Parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	s := &scanner{data: data}
	err := s.object(func(key string) error {
		var err error
		switch key {
		case "model":
			f.Model, err = s.scanModel()
			f.HasModel = true
		case "version":
			f.Version, err = s.raw()
		case "added_tokens":
			f.AddedTokens, err = s.raw()
		case "normalizer":
			f.Normalizer, err = s.raw()
		case "pre_tokenizer":
			f.PreTokenizer, err = s.raw()
		case "decoder":
			f.Decoder, err = s.raw()
		default:
			err = s.skip()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if s.peek() != 0 {
		return nil, s.errorf("data after the top-level object")
	}
	if !isNull(f.Version) {
		var v string
		if err := json.Unmarshal(f.Version, &v); err != nil || v != "1.0" {
			return nil, fmt.Errorf("%w: version %s (want \"1.0\")", ErrUnsupported, f.Version)
		}
	}
	if !f.HasModel || f.Model == nil {
		return nil, fmt.Errorf("%w: no model", ErrSyntax)
	}
	t := &Tokenizer{model: f.Model}
	if !isNull(f.Normalizer) {
		if t.norm, err = parseNormalizer(f.Normalizer, "normalizer"); err != nil {
			return nil, err
		}
	}
	if !isNull(f.PreTokenizer) {
		if t.pre, err = parsePreTokenizer(f.PreTokenizer, "pre_tokenizer"); err != nil {
			return nil, err
		}
	}
	if !isNull(f.Decoder) {
		if t.dec, err = parseDecoder(f.Decoder, "decoder"); err != nil {
			return nil, err
		}
	}
	var added []addedTokenJSON
	if !isNull(f.AddedTokens) {
		if err := json.Unmarshal(f.AddedTokens, &added); err != nil {
			return nil, fmt.Errorf("%w: added_tokens: %w", ErrSyntax, err)
		}
	}
	if err := t.addTokens(added); err != nil {
		return nil, err
	}
	return t, nil
}

func isNull(m json.RawMessage) bool {
	return len(bytes.TrimSpace(m)) == 0 || string(bytes.TrimSpace(m)) == "null"
}

// scanModel reads the model object. vocab and merges are located first and parsed only once
// the type is known to be BPE, so another model type gets a clear error rather than a
// syntax error about its differently shaped vocab.
func (s *scanner) scanModel() (*bpeModel, error) {
	if s.peek() == 'n' {
		return nil, s.skip()
	}
	var vocabAt, mergesAt [2]int
	haveVocab, haveMerges := false, false
	small := map[string]json.RawMessage{}
	err := s.object(func(key string) error {
		switch key {
		case "vocab", "merges":
			s.ws()
			start := s.pos
			if err := s.skip(); err != nil {
				return err
			}
			if key == "vocab" {
				vocabAt, haveVocab = [2]int{start, s.pos}, true
			} else {
				mergesAt, haveMerges = [2]int{start, s.pos}, true
			}
			return nil
		}
		raw, err := s.raw()
		small[key] = raw
		return err
	})
	if err != nil {
		return nil, err
	}
	var m struct {
		Type                    string
		Dropout                 *float64
		UnkToken                *string
		ContinuingSubwordPrefix *string
		EndOfWordSuffix         *string
		FuseUnk                 bool
		ByteFallback            bool
		IgnoreMerges            bool
	}
	fields := map[string]any{
		"type": &m.Type, "dropout": &m.Dropout, "unk_token": &m.UnkToken,
		"continuing_subword_prefix": &m.ContinuingSubwordPrefix, "end_of_word_suffix": &m.EndOfWordSuffix,
		"fuse_unk": &m.FuseUnk, "byte_fallback": &m.ByteFallback, "ignore_merges": &m.IgnoreMerges,
	}
	for k, raw := range small {
		if dst, ok := fields[k]; ok && !isNull(raw) {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, fmt.Errorf("%w: model.%s: %w", ErrSyntax, k, err)
			}
		}
	}
	if _, typed := small["type"]; !typed && !haveMerges {
		return nil, fmt.Errorf("%w: model has no \"type\"", ErrSyntax)
	}
	if m.Type != "" && m.Type != "BPE" {
		return nil, fmt.Errorf("%w: model type %q (only BPE is implemented)", ErrUnsupported, m.Type)
	}
	if m.Dropout != nil && *m.Dropout != 0 {
		return nil, fmt.Errorf("%w: model.dropout %v (BPE dropout makes encoding random)", ErrUnsupported, *m.Dropout)
	}
	if !haveVocab {
		return nil, fmt.Errorf("%w: model has no vocab", ErrSyntax)
	}
	if !haveMerges {
		return nil, fmt.Errorf("%w: model has no merges", ErrSyntax)
	}
	vs := &scanner{data: s.data[:vocabAt[1]], pos: vocabAt[0]}
	// A vocab entry takes at least ~8 bytes of JSON; sizing the map up front saves rehashing.
	vocab, err := vs.scanVocab((vocabAt[1] - vocabAt[0]) / 16)
	if err != nil {
		return nil, fmt.Errorf("model.vocab: %w", err)
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	// A merge takes at least ~8 bytes of JSON.
	model, err := newBPE(vocab, (mergesAt[1]-mergesAt[0])/16, str(m.UnkToken), m.ByteFallback, m.FuseUnk,
		m.IgnoreMerges, str(m.ContinuingSubwordPrefix), str(m.EndOfWordSuffix))
	if err != nil {
		return nil, err
	}
	ms := &scanner{data: s.data[:mergesAt[1]], pos: mergesAt[0]}
	var buf []byte
	err = ms.scanMerges(func(rank int, a, b []byte) error {
		buf, err = model.addMerge(rank, a, b, buf)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("model.merges: %w", err)
	}
	return model, nil
}

// typeOf reads a component's "type" field.
func typeOf(raw json.RawMessage, where string) (string, error) {
	var h struct {
		Type *string `json:"type"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return "", fmt.Errorf("%w: %s: %w", ErrSyntax, where, err)
	}
	if h.Type == nil {
		return "", fmt.Errorf("%w: %s has no \"type\"", ErrSyntax, where)
	}
	return *h.Type, nil
}

func decodeInto(raw json.RawMessage, where string, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSyntax, where, err)
	}
	return nil
}

// parsePattern compiles a {"String"|"Regex"} pattern. lit is set for string patterns.
func parsePattern(p *patternJSON, where string) (pat pattern, lit string, isLit bool, err error) {
	switch {
	case p == nil || (p.String == nil) == (p.Regex == nil):
		return nil, "", false, fmt.Errorf("%w: %s.pattern must hold exactly one of \"String\" or \"Regex\"", ErrSyntax, where)
	case p.String != nil:
		return literalPattern{*p.String}, *p.String, true, nil
	}
	re, err := compileRegex(*p.Regex)
	if err != nil {
		return nil, "", false, fmt.Errorf("%w: %s.pattern: %w", ErrSyntax, where, err)
	}
	return re, "", false, nil
}

func parseReplace(raw json.RawMessage, where string) (normReplace, error) {
	var r struct {
		Pattern *patternJSON `json:"pattern"`
		Content *string      `json:"content"`
	}
	if err := decodeInto(raw, where, &r); err != nil {
		return normReplace{}, err
	}
	if r.Content == nil {
		return normReplace{}, fmt.Errorf("%w: %s has no \"content\"", ErrSyntax, where)
	}
	pat, lit, isLit, err := parsePattern(r.Pattern, where)
	if err != nil {
		return normReplace{}, err
	}
	if isLit {
		return normReplace{lit: lit, content: *r.Content}, nil
	}
	return normReplace{pat: pat, content: *r.Content}, nil
}

func parseNormalizer(raw json.RawMessage, where string) (normalizer, error) {
	typ, err := typeOf(raw, where)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		items, err := parseSequence(raw, where, "normalizers", parseNormalizer)
		return normSequence(items), err
	case "Replace":
		return parseReplace(raw, where)
	case "Prepend":
		var p struct {
			Prepend *string `json:"prepend"`
		}
		if err := decodeInto(raw, where, &p); err != nil {
			return nil, err
		}
		if p.Prepend == nil {
			return nil, fmt.Errorf("%w: %s has no \"prepend\"", ErrSyntax, where)
		}
		return normPrepend{*p.Prepend}, nil
	case "NFC":
		return normUnicode{norm.NFC}, nil
	case "NFD":
		return normUnicode{norm.NFD}, nil
	case "NFKC":
		return normUnicode{norm.NFKC}, nil
	case "NFKD":
		return normUnicode{norm.NFKD}, nil
	case "Lowercase":
		return normLowercase{}, nil
	case "Strip":
		var s struct {
			Left  bool `json:"strip_left"`
			Right bool `json:"strip_right"`
		}
		if err := decodeInto(raw, where, &s); err != nil {
			return nil, err
		}
		return normStrip{s.Left, s.Right}, nil
	case "ByteLevel":
		return normByteLevel{}, nil
	}
	return nil, fmt.Errorf("%w: %s: normalizer type %q", ErrUnsupported, where, typ)
}

func parsePreTokenizer(raw json.RawMessage, where string) (preTokenizer, error) {
	typ, err := typeOf(raw, where)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		items, err := parseSequence(raw, where, "pretokenizers", parsePreTokenizer)
		return preSequence(items), err
	case "Split":
		var s struct {
			Pattern  *patternJSON `json:"pattern"`
			Behavior string       `json:"behavior"`
			Invert   bool         `json:"invert"`
		}
		if err := decodeInto(raw, where, &s); err != nil {
			return nil, err
		}
		pat, _, _, err := parsePattern(s.Pattern, where)
		if err != nil {
			return nil, err
		}
		b, err := parseBehavior(s.Behavior)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		if s.Invert {
			pat = invertPattern{pat}
		}
		return preSplit{pat: pat, b: b}, nil
	case "Metaspace":
		return parseMetaspace(raw, where)
	case "ByteLevel":
		b := struct {
			AddPrefixSpace bool `json:"add_prefix_space"`
			UseRegex       bool `json:"use_regex"`
		}{AddPrefixSpace: true, UseRegex: true}
		if err := decodeInto(raw, where, &b); err != nil {
			return nil, err
		}
		return preByteLevel{addPrefixSpace: b.AddPrefixSpace, useRegex: b.UseRegex}, nil
	case "Whitespace":
		return preWhitespace{}, nil
	case "WhitespaceSplit":
		return preWhitespaceSplit{}, nil
	case "Digits":
		var d struct {
			Individual bool `json:"individual_digits"`
		}
		if err := decodeInto(raw, where, &d); err != nil {
			return nil, err
		}
		return preDigits{d.Individual}, nil
	}
	return nil, fmt.Errorf("%w: %s: pre-tokenizer type %q", ErrUnsupported, where, typ)
}

func parseMetaspace(raw json.RawMessage, where string) (preMetaspace, error) {
	var m struct {
		Replacement    *string `json:"replacement"`
		AddPrefixSpace *bool   `json:"add_prefix_space"`
		PrependScheme  *string `json:"prepend_scheme"`
		Split          *bool   `json:"split"`
	}
	if err := decodeInto(raw, where, &m); err != nil {
		return preMetaspace{}, err
	}
	if m.Replacement == nil || utf8.RuneCountInString(*m.Replacement) != 1 {
		return preMetaspace{}, fmt.Errorf("%w: %s.replacement must be one character", ErrSyntax, where)
	}
	r, _ := utf8.DecodeRuneInString(*m.Replacement)
	scheme := prependAlways
	if m.PrependScheme != nil {
		switch *m.PrependScheme {
		case "always":
		case "first":
			scheme = prependFirst
		case "never":
			scheme = prependNever
		default:
			return preMetaspace{}, fmt.Errorf("%w: %s.prepend_scheme %q (want always, first or never)", ErrUnsupported, where, *m.PrependScheme)
		}
	}
	// The legacy add_prefix_space: false means "never", and must not contradict the scheme.
	if m.AddPrefixSpace != nil && !*m.AddPrefixSpace {
		if m.PrependScheme != nil && scheme != prependNever {
			return preMetaspace{}, fmt.Errorf("%w: %s: add_prefix_space false contradicts prepend_scheme %q", ErrSyntax, where, *m.PrependScheme)
		}
		scheme = prependNever
	}
	split := true
	if m.Split != nil {
		split = *m.Split
	}
	return preMetaspace{replacement: r, scheme: scheme, split: split}, nil
}

func parseDecoder(raw json.RawMessage, where string) (decoder, error) {
	typ, err := typeOf(raw, where)
	if err != nil {
		return nil, err
	}
	switch typ {
	case "Sequence":
		items, err := parseSequence(raw, where, "decoders", parseDecoder)
		return decSequence(items), err
	case "Replace":
		r, err := parseReplace(raw, where)
		if err != nil {
			return nil, err
		}
		return decReplace{r}, nil
	case "ByteFallback":
		return decByteFallback{}, nil
	case "Fuse":
		return decFuse{}, nil
	case "Strip":
		var s struct {
			Content *string `json:"content"`
			Start   int     `json:"start"`
			Stop    int     `json:"stop"`
		}
		if err := decodeInto(raw, where, &s); err != nil {
			return nil, err
		}
		if s.Content == nil || utf8.RuneCountInString(*s.Content) != 1 {
			return nil, fmt.Errorf("%w: %s.content must be one character", ErrSyntax, where)
		}
		if s.Start < 0 || s.Stop < 0 {
			return nil, fmt.Errorf("%w: %s: start %d and stop %d must not be negative", ErrSyntax, where, s.Start, s.Stop)
		}
		r, _ := utf8.DecodeRuneInString(*s.Content)
		return decStrip{content: r, start: s.Start, stop: s.Stop}, nil
	case "Metaspace":
		m, err := parseMetaspace(raw, where)
		if err != nil {
			return nil, err
		}
		return decMetaspace{replacement: m.replacement, scheme: m.scheme}, nil
	case "ByteLevel":
		return decByteLevel{}, nil
	case "BPEDecoder":
		s := struct {
			Suffix string `json:"suffix"`
		}{Suffix: "</w>"}
		if err := decodeInto(raw, where, &s); err != nil {
			return nil, err
		}
		return decBPE{s.Suffix}, nil
	}
	return nil, fmt.Errorf("%w: %s: decoder type %q", ErrUnsupported, where, typ)
}

// addTokens registers added_tokens the way the library does on load: a token already in the
// model vocab keeps that id; otherwise it takes the id the file declares.
func (t *Tokenizer) addTokens(list []addedTokenJSON) error {
	v := &t.added
	v.byContent = make(map[string]int32, len(list))
	v.byID = make(map[int32]int, len(list))
	modelToken := make(map[int32]string, len(t.model.vocab))
	maxModel := int32(-1)
	for tok, id := range t.model.vocab {
		if prev, dup := modelToken[id]; dup {
			return fmt.Errorf("%w: vocab tokens %q and %q share id %d", ErrBadModel, min(prev, tok), max(prev, tok), id)
		}
		modelToken[id] = tok
		maxModel = max(maxModel, id)
	}
	for i, a := range list {
		where := fmt.Sprintf("added_tokens[%d]", i)
		if a.Content == "" {
			continue // the library ignores empty added tokens
		}
		id, inVocab := t.model.vocab[a.Content]
		if !inVocab {
			if a.ID == nil {
				return fmt.Errorf("%w: %s %q has no id and is not in the model vocab", ErrSyntax, where, a.Content)
			}
			if *a.ID < 0 || *a.ID > maxID {
				return fmt.Errorf("%w: %s %q has id %d outside [0, %d]", ErrBadModel, where, a.Content, *a.ID, maxID)
			}
			id = int32(*a.ID)
			if other, taken := modelToken[id]; taken {
				return fmt.Errorf("%w: %s %q declares id %d, which the model vocab gives to %q", ErrBadModel, where, a.Content, id, other)
			}
		}
		normalized := !a.Special
		if a.Normalized != nil {
			normalized = *a.Normalized
		}
		tok := addedToken{
			content: a.Content, id: id, singleWord: a.SingleWord, lstrip: a.LStrip, rstrip: a.RStrip,
			normalized: normalized, special: a.Special, normContent: a.Content,
		}
		if normalized && t.norm != nil {
			p := piece{text: a.Content, id: -1, atStart: true}
			t.norm.normalize(&p)
			tok.normContent = p.text
		}
		if k, seen := v.byID[id]; seen && v.tokens[k].content != a.Content {
			return fmt.Errorf("%w: %s %q and added token %q share id %d", ErrBadModel, where, a.Content, v.tokens[k].content, id)
		}
		if old, seen := v.byContent[a.Content]; seen {
			// A repeated content replaces the earlier entry's properties.
			v.tokens[v.byID[old]] = tok
			continue
		}
		v.byContent[a.Content] = id
		v.byID[id] = len(v.tokens)
		v.tokens = append(v.tokens, tok)
	}

	size := int(maxModel) + 1
	for _, a := range v.tokens {
		size = max(size, int(a.id)+1)
	}
	t.idToTok = make([]string, size)
	for tok, id := range t.model.vocab {
		t.idToTok[id] = tok
	}
	specialContent := make(map[string]bool)
	for k, a := range v.tokens {
		t.idToTok[a.id] = a.normContent
		if a.special {
			specialContent[a.content] = true
		}
		if a.normalized {
			if v.norm == nil {
				v.norm = newTrie()
			}
			v.norm.insert(a.normContent, int32(k))
		} else {
			if v.raw == nil {
				v.raw = newTrie()
			}
			v.raw.insert(a.content, int32(k))
		}
	}
	t.special = make(map[int32]bool)
	for id, s := range t.idToTok {
		if specialContent[s] {
			t.special[int32(id)] = true
		}
	}
	if len(t.idToTok) == 0 {
		return fmt.Errorf("%w: empty vocab", ErrBadModel)
	}
	return nil
}

// parseSequence parses a Sequence component: the JSON array under field, each element
// parsed by parse with its position in the error context.
func parseSequence[T any](raw json.RawMessage, where, field string, parse func(json.RawMessage, string) (T, error)) ([]T, error) {
	var s map[string]json.RawMessage
	if err := decodeInto(raw, where, &s); err != nil {
		return nil, err
	}
	var list []json.RawMessage
	if r, ok := s[field]; ok {
		if err := decodeInto(r, where+"."+field, &list); err != nil {
			return nil, err
		}
	}
	out := make([]T, 0, len(list))
	for i, r := range list {
		v, err := parse(r, fmt.Sprintf("%s.%s[%d]", where, field, i))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
