package tokenizer

import "fmt"

// piece is one split of the text on its way through the pipeline (the library's Split inside
// a PreTokenizedString).
type piece struct {
	text string
	// id >= 0 marks an added token already resolved; later stages leave such pieces alone.
	id int32
	// atStart is true when the piece begins at offset 0 of the original text; Metaspace's
	// "first" prepend scheme only prefixes such a piece.
	atStart bool
}

// behavior is what Split does with the delimiter spans it finds.
type behavior int

const (
	removed behavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string) (behavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("%w: split behavior %q (want Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous)", ErrUnsupported, s)
}

// applyBehavior folds a tiling into the spans to keep, exactly as NormalizedString::split
// does; a segment whose match flag survives as true is a span to remove.
func applyBehavior(segs []segment, b behavior) []segment {
	switch b {
	case removed:
		return segs
	case isolated:
		for i := range segs {
			segs[i].match = false
		}
		return segs
	case contiguous:
		out := segs[:0]
		prev := false
		for _, s := range segs {
			if s.match == prev && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, segment{s.start, s.end, false})
			}
			prev = s.match
		}
		return out
	case mergedWithPrevious:
		out := segs[:0]
		prev := false
		for _, s := range segs {
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1].end = s.end
			} else {
				out = append(out, segment{s.start, s.end, false})
			}
			prev = s.match
		}
		return out
	case mergedWithNext:
		// Walk backwards, gluing a delimiter to the span after it, then restore the order.
		out := make([]segment, 0, len(segs))
		prev := false
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			if s.match && !prev && len(out) > 0 {
				out[len(out)-1].start = s.start
			} else {
				out = append(out, segment{s.start, s.end, false})
			}
			prev = s.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
		return out
	}
	panic(fmt.Sprintf("tokenizer: unknown split behavior %d", b))
}

// splitPieces runs a pattern with a behavior over every unresolved piece, dropping empty
// results as PreTokenizedString::split does.
func splitPieces(pieces []piece, p pattern, b behavior, buf *[]segment) []piece {
	out := make([]piece, 0, len(pieces))
	for _, pc := range pieces {
		if pc.id >= 0 {
			out = append(out, pc)
			continue
		}
		segs := applyBehavior(p.findMatches(pc.text, (*buf)[:0]), b)
		for _, s := range segs {
			if s.match || s.start == s.end {
				continue
			}
			out = append(out, piece{text: pc.text[s.start:s.end], id: -1, atStart: pc.atStart && s.start == 0})
		}
		*buf = segs[:0]
	}
	return out
}
