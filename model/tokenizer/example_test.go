package tokenizer_test

import (
	"encoding/json"
	"fmt"
	"log"
	"os"

	"github.com/r1go/r1go/model/tokenizer"
)

// A rollout's first steps: render the prompt, encode it, and decode sampled
// ids as they arrive.
func Example() {
	tok, err := tokenizer.Load("testdata/qwen2") // a Hugging Face model folder
	if err != nil {
		log.Fatal(err)
	}
	search := json.RawMessage(`{"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}}`)
	prompt, err := tok.Render([]tokenizer.Message{{Role: "user", Content: "Who wrote Hamlet?"}}, []json.RawMessage{search}, true)
	if err != nil {
		log.Fatal(err)
	}
	ids := tok.Encode(prompt)

	stop, _ := tok.EOS() // <|im_end|>
	dec := tok.NewStreamDecoder()
	for _, id := range tok.Encode("<tool_call>\n{\"name\": \"search\", \"arguments\": {\"query\": \"Hamlet\"}}\n</tool_call>") {
		fmt.Print(dec.Add(id)) // sampled ids, printed as they complete characters
		ids = append(ids, id)
	}
	fmt.Print(dec.Flush())
	ids = append(ids, stop)
	// The observation is forced text (action mask 0), encoded once: the
	// template's control tokens parsed, the tool's own output not, so that
	// it cannot inject <|im_end|>.
	ids = append(ids, tok.Encode("\n<|im_start|>user\n<tool_response>\n")...)
	ids = append(ids, tok.EncodeOrdinary("Shakespeare")...)
	ids = append(ids, tok.Encode("\n</tool_response><|im_end|>\n<|im_start|>assistant\n")...)
	fmt.Println(len(ids) > 0)
}

// Train a small Qwen2-style tokenizer and save it as a model folder.
func ExampleTrain() {
	corpus := []string{"the cat sat on the mat", "the dog sat on the log"}
	tok, err := tokenizer.Train(corpus, 300, tokenizer.TrainOptions{})
	if err != nil {
		log.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tiny-tokenizer")
	if err != nil {
		log.Fatal(err)
	}
	if err := tok.Save(dir); err != nil {
		log.Fatal(err)
	}
	fmt.Println(tok.Decode(tok.Encode("the cat")))
}
