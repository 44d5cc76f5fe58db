// Command mkfixtures trains the two small tokenizers the tests use, with
// the package's own trainer, from a corpus it generates deterministically:
//
//	go run ./model/tokenizer/testdata/mkfixtures
//
// qwen2/  Qwen2-style: NFC, the Qwen2 split pattern, merges as pairs,
//
//	Qwen2.5's added tokens, the built-in Qwen2.5 chat template.
//
// llama3/ Llama-3-style: no normalizer, the Llama 3 pattern (\p{N}{1,3}),
//
//	ignore_merges, merges as "a b" strings, Llama 3's special tokens,
//	a BOS post-processor and a Llama-3-style chat template.
//
// The golden ids in testdata/golden come from these files through
// @huggingface/transformers (golden/gen.mjs), so after running this the
// golden files must be regenerated too.
package main

import (
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/r1go/r1go/model/tokenizer"
)

func main() {
	dir := filepath.Join("model", "tokenizer", "testdata")
	if _, err := os.Stat(dir); err != nil {
		log.Fatalf("run from the repository root: %v", err)
	}
	corpus := makeCorpus(rand.New(rand.NewPCG(1, 2)), 6000)
	qwen, err := tokenizer.Train(corpus, 3000, tokenizer.TrainOptions{})
	if err != nil {
		log.Fatal(err)
	}
	if err := qwen.Save(filepath.Join(dir, "qwen2")); err != nil {
		log.Fatal(err)
	}
	template, err := os.ReadFile(filepath.Join(dir, "llama3_template.jinja"))
	if err != nil {
		log.Fatal(err)
	}
	llama, err := tokenizer.Train(corpus, 2500, tokenizer.TrainOptions{
		Pattern:         `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
		NoNormalizer:    true,
		AddedTokens:     llamaAddedTokens(),
		MergesAsStrings: true,
		IgnoreMerges:    true,
		BOSToken:        "<|begin_of_text|>",
		EOSToken:        "<|eot_id|>",
		PadToken:        "<|end_of_text|>",
		ChatTemplate:    string(template),
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := llama.Save(filepath.Join(dir, "llama3")); err != nil {
		log.Fatal(err)
	}
	fmt.Println("wrote", filepath.Join(dir, "qwen2"), "and", filepath.Join(dir, "llama3"))
}

func llamaAddedTokens() []tokenizer.AddedToken {
	var out []tokenizer.AddedToken
	for _, s := range []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
		"<|eom_id|>", "<|eot_id|>", "<|python_tag|>"} {
		out = append(out, tokenizer.AddedToken{Content: s, Special: true})
	}
	for i := range 8 {
		out = append(out, tokenizer.AddedToken{Content: fmt.Sprintf("<|reserved_special_token_%d|>", i), Special: true})
	}
	// A non-special added token, as Qwen's <tool_call>.
	out = append(out, tokenizer.AddedToken{Content: "<tool_call>"}, tokenizer.AddedToken{Content: "</tool_call>"})
	return out
}

// Words per script, so that merges form inside every script the tests use.
var lexicon = [][]string{
	strings.Fields("the of and to in is that for it as was with be by on not he this are or his from at which but have an they you were her she there been one all we their has would when if so no will more can out said what up its about into than them only other new some could time these two may then do first any my now such like our over man me even most made after also did many before must through back years where much your way well down should because each just those people how too little state good very make world still own see men work long get here between both life being under never day same another know while last might us great old year off come since against go came right used take three"),
	strings.Fields("func return err nil if else for range struct type package import var const map string int byte len append make go defer select case switch default break continue chan interface"),
	strings.Fields("café naïve résumé déjà über Straße Äpfel Öl Müller façade garçon señor niño año crème brûlée coöperate Ångström smörgåsbord"),
	strings.Fields("привет мир это тест как дела хорошо спасибо Москва книга язык программирования данные модель обучение"),
	strings.Fields("γεια σου κόσμε αλφάβητο Ελλάδα λόγος"),
	strings.Fields("你好 世界 中文 测试 模型 训练 数据 我们 今天 天气 很好 北京 上海 学习 机器 工具 调用 搜索 答案 问题"),
	strings.Fields("こんにちは 世界 日本語 テスト カタカナ ひらがな 東京 ありがとう"),
	strings.Fields("안녕하세요 세계 한국어 테스트 서울 감사합니다"),
	strings.Fields("مرحبا بالعالم اللغة العربية اختبار"),
	strings.Fields("नमस्ते दुनिया हिन्दी परीक्षण भारत"),
	strings.Fields("😀 🎉 👍 🚀 ❤️ 👨‍👩‍👧 🇫🇷 ✨ 🔥 🤖"),
}

var punctuation = []string{".", ",", "!", "?", ";", ":", "...", " -", " (", ")", "\"", "'", "—", "«", "»", "、", "。", "！", "{", "}", "[", "]", " =", " :=", " +", " //", "#"}
var contractions = []string{"'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'T", "'RE"}
var spacing = []string{" ", " ", " ", " ", "\n", "\n\n", "  ", "\t", "\r\n", "    ", " \n", "\u3000", "\u00a0"}

func makeCorpus(rng *rand.Rand, lines int) []string {
	var corpus []string
	for range lines {
		var b strings.Builder
		words := 4 + rng.IntN(16)
		script := rng.IntN(len(lexicon))
		for w := range words {
			if rng.IntN(5) == 0 {
				script = rng.IntN(len(lexicon))
			}
			if w > 0 {
				b.WriteString(spacing[rng.IntN(len(spacing))])
			}
			list := lexicon[script]
			word := list[rng.IntN(len(list))]
			switch rng.IntN(8) {
			case 0:
				r := []rune(word)
				word = strings.ToUpper(string(r[:1])) + string(r[1:])
			case 1:
				word += contractions[rng.IntN(len(contractions))]
			case 2:
				word = fmt.Sprint(rng.IntN(100000))
			}
			b.WriteString(word)
			if rng.IntN(4) == 0 {
				b.WriteString(punctuation[rng.IntN(len(punctuation))])
			}
		}
		corpus = append(corpus, b.String())
	}
	return corpus
}
