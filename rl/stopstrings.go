package rl

import "strings"

// Stop strings. An environment whose model turns end at text rather than
// at a special token (Search-R1's "</search>" and "</answer>", which are
// several tokens each) says so with a StopStrings method; the rollout then
// ends a turn when its decoded text holds one of them.
//
// Token in, token out holds: the sampled ids are never re-encoded. The
// turn's text is decoded incrementally (Tokenizer.Decode is a
// concatenation of each token's bytes, so appending one token's bytes per
// step is exact), checked only where the newest token can have completed a
// stop string, and when a stop string ends inside the last token (the
// token also carries text after the tag) the whole token is kept and only
// the text handed to the environment is cut at the stop string's end.

// StopStringer is the optional method of an env.Environment whose turns end
// at stop strings.
type StopStringer interface {
	StopStrings() []string
}

// stopStrings are the environment's stop strings; nil for one that has none.
func (r *Rollout) stopStrings() []string {
	if ss, ok := r.Env.(StopStringer); ok {
		return ss.StopStrings()
	}
	return nil
}

// stopStringEnd appends the text of s's newest token (id) to its turn text
// and returns the byte offset in the turn text just past the first stop
// string the token completes, or -1.
func (r *Rollout) stopStringEnd(s *trajState, stops []string, id int32) int {
	before := len(s.text)
	s.text = append(s.text, r.Tok.Decode([]int{int(id)})...)
	end := -1
	for _, stop := range stops {
		from := max(0, before-len(stop)+1) // a match must end in the new bytes
		if i := strings.Index(string(s.text[from:]), stop); i >= 0 {
			if e := from + i + len(stop); end < 0 || e < end {
				end = e
			}
		}
	}
	return end
}
