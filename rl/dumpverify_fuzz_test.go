package rl

import (
	"encoding/json"
	"testing"
)

// FuzzVerifyRecord feeds arbitrary dump lines to what cmd/rollouts -verify
// does with them: a record that reads must verify or be refused, never
// panic, whatever its tokens, masks, spans and turn samples claim.
func FuzzVerifyRecord(f *testing.F) {
	f.Add([]byte(`{"index":0,"text":"<|im_start|>assistant\nab","spans":[{"kind":"prompt","start":0,"end":22,"token_start":0,"token_end":2},{"kind":"action","start":22,"end":24,"token_start":2,"token_end":3}],"tokens":[1,2,3],"action":[false,false,true],"logprobs":[0,0,-0.5]}`))
	f.Add([]byte(`{"tokens":[1,2,3,4],"action":[false,true,false,true],"logprobs":[0,-1,0,-1],"spans":[{"kind":"prompt","start":0,"end":0,"token_start":0,"token_end":9}],"turn_samples":[{"prompt":[1],"response":[2],"logprobs":[-1]},{"prompt":[],"response":[4,5],"logprobs":[-1]}]}`))
	f.Add([]byte(`{"tokens":[7],"action":[true,true],"logprobs":[]}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		var r DumpRecord
		if json.Unmarshal(line, &r) != nil || r.checkSpans() != nil {
			return // ReadDump refuses it before the verifier
		}
		VerifyRecord(&r, QwenTemplate())
		VerifyRecord(&r, DumpTemplate(&r))
	})
}
