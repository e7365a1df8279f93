package data

import (
	"errors"
	"fmt"

	"github.com/dgtune/dgtune/imageproc"
)

// Encoder turns an example into token ids: the prompt (chat template with the
// generation prompt) and the target (completion, truncated). The caller supplies it so
// this package knows nothing of tokenizers.
type Encoder func(ex Example) (prompt, target []int32, err error)

// Pair is one tokenized example.
type Pair struct {
	Index  int // Example.Index of the example it came from
	Prompt []int32
	Target []int32
	// Images are the example's images, whose image blocks the encoder has expanded in
	// Prompt; nil for text-only examples.
	Images []*imageproc.Source
}

// errEmptyTarget marks an example the trainer could not learn from: a canvas of length
// zero has no positions to corrupt.
var errEmptyTarget = errors.New("empty target after encoding")

// Tokenize encodes every example of split. An example whose target encodes to no ids
// is a bad row (skipped and counted under opts.SkipBadRows); an encoder error is always
// fatal, because it usually means the template or tokenizer is wrong for every example.
// A non-empty split that yields no pairs is an error.
func Tokenize(split *Split, enc Encoder, opts Options) ([]Pair, Stats, error) {
	var stats Stats
	pairs := make([]Pair, 0, len(split.Examples))
	for _, ex := range split.Examples {
		stats.Rows++
		prompt, target, err := enc(ex)
		if err != nil {
			return nil, stats, &RowError{File: split.Path, Line: ex.Line, Err: fmt.Errorf("example %d: encode: %w", ex.Index, err)}
		}
		if len(target) == 0 {
			rerr := &RowError{File: split.Path, Line: ex.Line, Err: fmt.Errorf("example %d: %w", ex.Index, errEmptyTarget)}
			if !opts.SkipBadRows {
				return nil, stats, rerr
			}
			stats.skip(rerr)
			continue
		}
		pairs = append(pairs, Pair{Index: ex.Index, Prompt: prompt, Target: target, Images: ex.Images})
	}
	if len(pairs) == 0 && len(split.Examples) > 0 {
		return nil, stats, fmt.Errorf("data: %s: no example has a non-empty target (%d skipped)", split.Path, stats.Skipped)
	}
	return pairs, stats, nil
}
