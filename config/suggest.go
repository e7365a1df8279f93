package config

// Suggest returns the candidate closest to name by edit distance, when it is close enough
// to be a likely typo: at most a third of name's length away (and at least 2 edits are
// allowed), so "--itres" suggests "--iters" but "--colour" suggests nothing.
func Suggest(name string, candidates []string) (string, bool) {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		if d := editDistance(name, c); d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	if best == "" || bestD > max(2, len(name)/3) {
		return "", false
	}
	return best, true
}
