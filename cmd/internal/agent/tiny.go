package agent

import (
	"context"
	"fmt"
	"strings"

	"github.com/r1go/r1go/data"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/tokenizer"
)

// trainTokenizer trains a byte-level BPE (Qwen2 pre-tokenizer, Qwen's
// special tokens) on the synthetic world's texts and on whole rendered
// conversations (the chat template's tool block, gold turns and the search
// tool's real observations), so that every part of a trajectory encodes
// compactly, then saves it in dir.
func trainTokenizer(ctx context.Context, s *Setup, vocab int, dir string) (*tokenizer.Tokenizer, error) {
	texts := s.World.Texts()
	// A first tokenizer only to render the chat template.
	first, err := tokenizer.Train(texts, 300, tokenizer.TrainOptions{})
	if err != nil {
		return nil, err
	}
	n := min(len(s.Train), 400)
	for _, smp := range s.Train[:n] {
		conv, err := renderGold(ctx, first, s, smp)
		if err != nil {
			return nil, err
		}
		texts = append(texts, conv)
	}
	tok, err := tokenizer.Train(texts, vocab, tokenizer.TrainOptions{})
	if err != nil {
		return nil, err
	}
	if err := tok.Save(dir); err != nil {
		return nil, err
	}
	return tokenizer.Load(dir) // exactly what a later run or eval reads back
}

// renderGold renders a sample's gold conversation as text: the prompt the
// rollout sends and each gold turn followed by the environment's answer.
func renderGold(ctx context.Context, tok *tokenizer.Tokenizer, s *Setup, smp data.Sample) (string, error) {
	ep := s.Env.Episode()
	msgs, tools := ep.Reset(smp)
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	text, err := tok.Render(tm, tools, true)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString(text)
	if smp.Gold == nil {
		return b.String(), nil
	}
	for _, turn := range smp.Gold.Turns() {
		b.WriteString(turn)
		res := ep.Step(ctx, turn)
		if res.Observation == "" {
			b.WriteString("<|im_end|>\n")
			break
		}
		b.WriteString(res.Observation)
	}
	return b.String(), nil
}

// tinyModel makes a Qwen2-architecture model of the configured shape with
// Hugging Face's initialisation. Its end-of-sequence tokens are
// <|im_end|> and <|endoftext|>, as in Qwen2.5-Instruct, so that a saved
// policy stops where r1go's rollouts stop when transformers generates.
func tinyModel(mc ModelConfig, tok *tokenizer.Tokenizer, dev model.Device) (*model.Model, error) {
	eos, err := tokenIDs(tok, "<|im_end|>", "<|endoftext|>")
	if err != nil {
		return nil, err
	}
	vocab := tok.VocabSize()
	raw := fmt.Sprintf(`{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": %d,
		"intermediate_size": %d, "num_hidden_layers": %d, "num_attention_heads": %d,
		"num_key_value_heads": %d, "vocab_size": %d, "rms_norm_eps": 1e-6, "rope_theta": 10000.0,
		"max_position_embeddings": %d, "hidden_act": "silu", "initializer_range": 0.02,
		"tie_word_embeddings": true, "use_sliding_window": false, "sliding_window": null,
		"torch_dtype": "float32", "bos_token_id": null, "eos_token_id": [%d, %d], "use_cache": true}`,
		mc.Hidden, mc.Intermediate, mc.Layers, mc.Heads, mc.KVHeads, vocab, mc.MaxContext, eos[0], eos[1])
	cfg, err := model.ParseConfig([]byte(raw), "tiny model config")
	if err != nil {
		return nil, err
	}
	m, err := model.New(cfg, dev, model.LMHeadOutput)
	if err != nil {
		return nil, err
	}
	m.InitRandom(mc.Seed)
	return m, nil
}
