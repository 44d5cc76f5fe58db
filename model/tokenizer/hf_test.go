//go:build hftokenizers

package tokenizer

func init() {
	backends["hf"] = func(dir string) (Codec, error) { return NewHF(dir) }
}
