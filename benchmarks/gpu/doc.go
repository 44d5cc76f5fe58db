// Package gpu holds the checks of r1go against the implementations its users
// trust, made where those implementations run (the GPU machine, which has
// PyTorch, transformers, tokenizers and tensorboard), and the transformers
// side of the GPU speed table. README.md gives the one-command recipe.
//
// The Python scripts make fixtures (Hugging Face folders saved by
// transformers' Qwen2ForCausalLM with their golden logits; a tokenizer
// trained by Hugging Face tokenizers with golden ids); the Go tests of this
// package compare r1go with them on the CPU, in CI, once they are committed,
// and skip with a message naming the script while they are absent. There is
// no central type: the package has only tests. Errors: a malformed fixture
// fails the test naming its file.
package gpu
