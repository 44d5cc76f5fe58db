// Command tokenize encodes, decodes and renders chats with a Hugging Face
// tokenizer folder, one JSON object per line in and out:
//
//	go run ./cmd/tokenize -tokenizer DIR < in.jsonl > out.jsonl
//
// Input lines and what each gives back:
//
//	{"text": "hello"}                        {"ids": [...]}
//	{"ids": [1, 2, 3]}                       {"text": "..."}
//	{"messages": [...], "tools": [...],      {"text": rendered template, "ids": [...]}
//	 "add_generation_prompt": true}
//
// An "id" field is copied to the output line. A line that cannot be handled
// gives {"error": "line N: ..."} and the run goes on; the exit status is 1
// when any line failed. -ordinary encodes text without parsing special
// tokens. -chat-template-kwargs '{"enable_thinking": false}' passes keyword
// arguments to every chat render, as apply_chat_template(**kwargs) does
// (Qwen3's empty think block); a record's own "chat_template_kwargs"
// object, as vLLM takes it per request, wins over the flag key by key.
// Messages are transformers' dicts: an assistant's "reasoning_content"
// reaches the template (Qwen3 renders it in <think></think>).
//
// With -train FILE the command instead trains a Qwen2-style tokenizer on
// FILE (one document per line) and saves it to -save DIR.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/r1go/r1go/model/tokenizer"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

type request struct {
	ID                  json.RawMessage     `json:"id,omitempty"`
	Text                *string             `json:"text"`
	IDs                 []int               `json:"ids"`
	Messages            []tokenizer.Message `json:"messages"`
	Tools               []json.RawMessage   `json:"tools"`
	AddGenerationPrompt bool                `json:"add_generation_prompt"`
	// ChatTemplateKwargs are this record's template keyword arguments, as
	// vLLM takes them per request; they win over -chat-template-kwargs key
	// by key.
	ChatTemplateKwargs json.RawMessage `json:"chat_template_kwargs"`
}

type response struct {
	ID    json.RawMessage `json:"id,omitempty"`
	Text  *string         `json:"text,omitempty"`
	IDs   *[]int          `json:"ids,omitempty"` // a pointer so that [] is written
	Error string          `json:"error,omitempty"`
}

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tokenize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, `usage: tokenize -tokenizer DIR [-ordinary] [-chat-template-kwargs JSON] [-in FILE] < in.jsonl > out.jsonl
       tokenize -train CORPUS.txt -vocab N -save DIR

One JSON object per line:
  {"text": "..."}                                  -> {"ids": [...]}
  {"ids": [...]}                                   -> {"text": "..."}
  {"messages": [...], "tools": [...], "add_generation_prompt": true,
   "chat_template_kwargs": {"enable_thinking": false}}
                                                   -> {"text": "...", "ids": [...]}
An "id" field is copied through; a bad line gives {"error": "line N: ..."}.
A record's chat_template_kwargs win over -chat-template-kwargs key by key.

`)
		fs.PrintDefaults()
	}
	dir := fs.String("tokenizer", "", "Hugging Face model folder with tokenizer.json")
	ordinary := fs.Bool("ordinary", false, "encode text without parsing special tokens")
	in := fs.String("in", "", "input JSONL file (default stdin)")
	kwargs := fs.String("chat-template-kwargs", "", `chat template keyword arguments, a JSON object (e.g. {"enable_thinking": false})`)
	train := fs.String("train", "", "train a tokenizer on this text file (one document per line) instead")
	vocab := fs.Int("vocab", 4096, "with -train: vocabulary size without added tokens")
	save := fs.String("save", "", "with -train: folder to write the tokenizer to")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *train != "" {
		return trainCommand(*train, *vocab, *save, stderr)
	}
	if *dir == "" {
		fmt.Fprintln(stderr, "tokenize: -tokenizer DIR is required")
		fs.Usage()
		return 2
	}
	kw, err := tokenizer.ParseTemplateKwargs(*kwargs)
	if err != nil {
		fmt.Fprintln(stderr, "tokenize: -chat-template-kwargs:", err)
		return 2
	}
	tok, err := tokenizer.Load(*dir)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	tok.SetTemplateKwargs(kw)
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintln(stderr, "tokenize:", err)
			return 1
		}
		defer f.Close()
		stdin = f
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	failed := 0
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		resp, err := handle(tok, sc.Bytes(), *ordinary)
		if err != nil {
			failed++
			resp.Error = fmt.Sprintf("line %d: %v", line, err)
		}
		if err := enc.Encode(resp); err != nil {
			fmt.Fprintln(stderr, "tokenize:", err)
			return 1
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(stderr, "tokenize: reading input:", err)
		return 1
	}
	if failed > 0 {
		fmt.Fprintf(stderr, "tokenize: %d lines failed\n", failed)
		return 1
	}
	return 0
}

func handle(tok *tokenizer.Tokenizer, line []byte, ordinary bool) (response, error) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return response{}, fmt.Errorf("invalid JSON: %v", err)
	}
	resp := response{ID: req.ID}
	switch {
	case req.Messages != nil:
		kw, err := tokenizer.ParseTemplateKwargs(string(req.ChatTemplateKwargs))
		if err != nil {
			return resp, fmt.Errorf("chat_template_kwargs: %v", err)
		}
		text, err := tok.RenderChat(tokenizer.Chat{Messages: req.Messages, Tools: req.Tools, AddGenerationPrompt: req.AddGenerationPrompt, Vars: kw.Vars()})
		if err != nil {
			return resp, err
		}
		ids := tok.Encode(text)
		resp.Text, resp.IDs = &text, &ids
	case req.Text != nil && req.IDs == nil:
		ids := tok.Encode(*req.Text)
		if ordinary {
			ids = tok.EncodeOrdinary(*req.Text)
		}
		if ids == nil {
			ids = []int{}
		}
		resp.IDs = &ids
	case req.IDs != nil && req.Text == nil:
		for i, id := range req.IDs {
			if id < 0 || id >= tok.VocabSize() {
				return resp, fmt.Errorf("ids[%d]: %d is not a token id (vocabulary size %d)", i, id, tok.VocabSize())
			}
		}
		text := tok.DecodeText(req.IDs)
		resp.Text = &text
	default:
		return resp, errors.New(`want exactly one of "text", "ids" or "messages"`)
	}
	return resp, nil
}

func trainCommand(corpusPath string, vocab int, save string, stderr io.Writer) int {
	if save == "" {
		fmt.Fprintln(stderr, "tokenize: -train needs -save DIR")
		return 2
	}
	data, err := os.ReadFile(corpusPath)
	if err != nil {
		fmt.Fprintln(stderr, "tokenize:", err)
		return 1
	}
	tok, err := tokenizer.Train(strings.Split(string(data), "\n"), vocab, tokenizer.TrainOptions{})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := tok.Save(save); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	fmt.Fprintf(stderr, "tokenize: wrote %s (%d ids)\n", save, tok.VocabSize())
	return 0
}
