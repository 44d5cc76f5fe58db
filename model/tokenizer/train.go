package tokenizer

import (
	"container/heap"
	"fmt"
	"sort"
)

// TrainOptions configures Train. The zero value trains a Qwen2-style
// tokenizer: NFC, the Qwen2 split pattern, byte-level BPE, Qwen2.5's 22
// added tokens, merges written as pairs, <|im_end|> as EOS.
type TrainOptions struct {
	Pattern         string       // Split regex; "" is the Qwen2 pattern
	NoNormalizer    bool         // no NFC normalizer (Llama 3 has none)
	AddedTokens     []AddedToken // appended after the vocabulary, ids assigned in order; nil: Qwen2.5's
	MergesAsStrings bool         // write merges as "a b" (tokenizers < 0.20) instead of ["a", "b"]
	IgnoreMerges    bool         // model.ignore_merges (Llama 3 sets it)
	MinFrequency    int          // a pair must occur this often to be merged; 0 means 2
	BOSToken        string       // added by the post_processor and named in the config; "" for none
	EOSToken        string       // "" means <|im_end|> when that token exists
	PadToken        string       // "" means <|endoftext|> when that token exists
	ChatTemplate    string       // written as chat_template.jinja; "" is the built-in Qwen2.5 template
}

// QwenAddedTokens returns Qwen2.5's added tokens (formats: 13 special, the
// tool-call tags and FIM tokens not special), without ids.
func QwenAddedTokens() []AddedToken {
	special := []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>",
		"<|box_start|>", "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>",
		"<|vision_pad|>", "<|image_pad|>", "<|video_pad|>"}
	plain := []string{"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>",
		"<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}
	var out []AddedToken
	for _, s := range special {
		out = append(out, AddedToken{Content: s, Special: true})
	}
	for _, s := range plain {
		out = append(out, AddedToken{Content: s})
	}
	return out
}

// Train learns a byte-level BPE tokenizer from a corpus: the 256 byte
// tokens, then merges of the most frequent adjacent pair (ties to the
// smaller pair of ids) until the vocabulary has vocabSize tokens or no pair
// occurs MinFrequency times. Added tokens are not counted in vocabSize.
// Text that spells an added token is left out of the counts.
func Train(corpus []string, vocabSize int, opts TrainOptions) (*Tokenizer, error) {
	if vocabSize < 256 {
		return nil, fmt.Errorf("tokenizer: Train: vocabSize %d is below the 256 byte tokens", vocabSize)
	}
	if opts.Pattern == "" {
		opts.Pattern = qwen2Pattern
	}
	if opts.AddedTokens == nil {
		opts.AddedTokens = QwenAddedTokens()
	}
	if opts.MinFrequency == 0 {
		opts.MinFrequency = 2
	}
	// The skeleton without merges does the pre-tokenization, so training
	// splits text exactly as encoding will.
	skeleton, err := buildJSON(opts, nil, nil)
	if err != nil {
		return nil, err
	}
	pre, err := Parse(skeleton, "Train")
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	st := pre.state()
	for _, doc := range corpus {
		for _, p := range pre.all.raw.split(nil, doc) {
			if p.id >= 0 {
				continue
			}
			text := p.text
			if pre.normalize != nil {
				text = pre.normalize(text)
			}
			for _, w := range preTokenize(pre.steps, text, &st.bufs) {
				counts[w]++
			}
		}
	}
	tr := newTrainer(counts)
	tr.run(vocabSize, opts.MinFrequency)
	data, err := buildJSON(opts, tr.tokens, tr.merges)
	if err != nil {
		return nil, err
	}
	t, err := Parse(data, "Train")
	if err != nil {
		return nil, err
	}
	t.configJSON, err = buildConfigJSON(t, opts)
	if err != nil {
		return nil, err
	}
	if err := t.applyConfig(t.configJSON, "Train: tokenizer_config.json"); err != nil {
		return nil, err
	}
	if opts.ChatTemplate != "" {
		t.templates = chatTemplates{text: opts.ChatTemplate, source: "TrainOptions.ChatTemplate"}
	}
	return t, nil
}

// trainer holds the words (distinct pieces) as symbol ids and, for every
// adjacent pair, its weighted count and the words it occurs in.
type trainer struct {
	tokens []string // id -> byte string of the token
	index  map[string]int
	merges [][2]int
	words  [][]int
	freq   []int
	count  map[uint64]int
	where  map[uint64]map[int]struct{}
	queue  pairQueue
}

func newTrainer(counts map[string]int) *trainer {
	tr := &trainer{index: map[string]int{}, count: map[uint64]int{}, where: map[uint64]map[int]struct{}{}}
	for _, b := range byteOrder {
		tr.index[string([]byte{b})] = len(tr.tokens)
		tr.tokens = append(tr.tokens, string([]byte{b}))
	}
	// Sorted words make the run independent of map order.
	words := make([]string, 0, len(counts))
	for w := range counts {
		words = append(words, w)
	}
	sort.Strings(words)
	for wi, w := range words {
		syms := make([]int, len(w))
		for i := 0; i < len(w); i++ {
			syms[i] = tr.index[w[i:i+1]]
		}
		tr.words = append(tr.words, syms)
		tr.freq = append(tr.freq, counts[w])
		tr.addPairs(wi, +1)
	}
	for key, c := range tr.count {
		heap.Push(&tr.queue, queuedPair{key, c})
	}
	return tr
}

// addPairs adds (sign +1) or removes (-1) word wi's pairs from the counts.
func (tr *trainer) addPairs(wi, sign int) {
	syms := tr.words[wi]
	for i := 0; i+1 < len(syms); i++ {
		key := pairKey(int32(syms[i]), int32(syms[i+1]))
		tr.count[key] += sign * tr.freq[wi]
		if sign > 0 {
			set := tr.where[key]
			if set == nil {
				set = map[int]struct{}{}
				tr.where[key] = set
			}
			set[wi] = struct{}{}
		}
	}
}

func (tr *trainer) run(vocabSize, minFrequency int) {
	for len(tr.tokens) < vocabSize && tr.queue.Len() > 0 {
		top := heap.Pop(&tr.queue).(queuedPair)
		if c := tr.count[top.key]; c != top.count {
			if c > 0 {
				heap.Push(&tr.queue, queuedPair{top.key, c}) // stale: requeue with the true count
			}
			continue
		}
		if top.count < minFrequency {
			return
		}
		left, right := int(top.key>>32), int(uint32(top.key))
		merged := tr.tokens[left] + tr.tokens[right]
		id, ok := tr.index[merged]
		if !ok {
			id = len(tr.tokens)
			tr.index[merged] = id
			tr.tokens = append(tr.tokens, merged)
		}
		tr.merges = append(tr.merges, [2]int{left, right})
		touched := map[uint64]bool{}
		for wi := range tr.where[top.key] {
			syms := tr.words[wi]
			tr.addPairs(wi, -1)
			out := syms[:0]
			for i := 0; i < len(syms); i++ {
				if i+1 < len(syms) && syms[i] == left && syms[i+1] == right {
					out = append(out, id)
					i++
					continue
				}
				out = append(out, syms[i])
			}
			tr.words[wi] = out
			tr.addPairs(wi, +1)
			for i := 0; i+1 < len(out); i++ {
				touched[pairKey(int32(out[i]), int32(out[i+1]))] = true
			}
		}
		delete(tr.where, top.key)
		delete(tr.count, top.key)
		for key := range touched {
			if c := tr.count[key]; c > 0 {
				heap.Push(&tr.queue, queuedPair{key, c})
			}
		}
	}
}

type queuedPair struct {
	key   uint64
	count int
}

// pairQueue is a max-heap on count; ties go to the smaller pair of ids.
type pairQueue []queuedPair

func (q pairQueue) Len() int { return len(q) }
func (q pairQueue) Less(i, j int) bool {
	return q[i].count > q[j].count || q[i].count == q[j].count && q[i].key < q[j].key
}
func (q pairQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *pairQueue) Push(x any)   { *q = append(*q, x.(queuedPair)) }
func (q *pairQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}
