package tokenizer

import "github.com/nikolalohinski/gonja/v2/exec"

func execValue(v any) *exec.Value { return exec.AsValue(v) }
func emptyArgs() *exec.VarArgs    { return exec.NewVarArgs() }
