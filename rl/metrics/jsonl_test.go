package metrics

import (
	"bufio"
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// sameValue is equality with NaN equal to itself; -0 equals 0 because
// FormatNumber writes both as 0.
func sameValue(a, b float64) bool {
	return a == b || math.IsNaN(a) && math.IsNaN(b)
}

func TestJSONLRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "metrics.jsonl")
	steps := []Record{
		{1, map[string]float64{"critic/score/mean": 0.25, "actor/lr": 1e-6, "perf/total_num_tokens": 123456}},
		{2, map[string]float64{}},
		{3, map[string]float64{"nan": math.NaN(), "inf": math.Inf(1), "-inf": math.Inf(-1), "tiny": 5e-324,
			"big": 1.7976931348623157e308, "step": 99, `quote"back\slash`: -0.5, "<html>&": 1}},
	}
	for _, c := range loadConsoleGolden(t) { // the same awkward numbers as the console test
		r := Record{Step: 100 + c.Step, Data: map[string]float64{}}
		for k, h := range c.Values {
			r.Data[k] = pyHexFloat(t, h)
		}
		steps = append(steps, r)
	}
	j, err := CreateJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range steps {
		if err := j.Log(r.Step, r.Data); err != nil {
			t.Fatal(err)
		}
	}
	// Each line is on disk as soon as Log returns, before Close.
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(raw, []byte("\n")); n != len(steps) {
		t.Fatalf("%d lines on disk before Close, want %d", n, len(steps))
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}

	// Every line is standard JSON of the documented shape (checked with
	// encoding/json, not with ReadJSONL).
	sc := bufio.NewScanner(bytes.NewReader(raw))
	for i := 0; sc.Scan(); i++ {
		var obj struct {
			Step *int                   `json:"step"`
			Data map[string]interface{} `json:"data"`
		}
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&obj); err != nil || obj.Step == nil || *obj.Step != steps[i].Step || obj.Data == nil {
			t.Fatalf("line %d %q: %v", i+1, sc.Text(), err)
		}
		if len(obj.Data) != len(steps[i].Data) {
			t.Errorf("line %d: %d fields, want %d", i+1, len(obj.Data), len(steps[i].Data))
		}
	}
	if !bytes.Contains(raw, []byte(`"nan":"NaN"`)) || !bytes.Contains(raw, []byte(`"-inf":"-Infinity"`)) {
		t.Errorf("non-finite values not spelled as documented:\n%s", raw)
	}

	got, err := ReadJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(steps) {
		t.Fatalf("read %d records, want %d", len(got), len(steps))
	}
	for i, r := range steps {
		if got[i].Step != r.Step || len(got[i].Data) != len(r.Data) {
			t.Errorf("record %d = %+v, want %+v", i, got[i], r)
			continue
		}
		for k, v := range r.Data {
			if g, ok := got[i].Data[k]; !ok || !sameValue(g, v) {
				t.Errorf("record %d %q = %v, want %v", i, k, g, v)
			}
		}
	}

	// Reopening appends (a resumed run continues the file).
	j, err = CreateJSONL(path)
	if err != nil {
		t.Fatal(err)
	}
	j.Log(200, map[string]float64{"a": 1})
	j.Close()
	if got, err := ReadJSONL(path); err != nil || len(got) != len(steps)+1 || got[len(steps)].Step != 200 {
		t.Errorf("after reopening: %d records, %v", len(got), err)
	}
}

func TestReadJSONLErrors(t *testing.T) {
	good := `{"step":1,"data":{"a":1}}` + "\n"
	cases := []struct {
		name, text, want string
	}{
		{"cut line", good + `{"step":2,"data":{"a":`, ":2: "},
		{"no step", good + "\n" + `{"data":{}}` + "\n", `:3: no "step" field`},
		{"no data", good + `{"step":2}`, `:2: no "data" object`},
		{"fraction step", `{"step":1.5,"data":{}}`, ":1: step 1.5"},
		{"negative step", `{"step":-1,"data":{}}`, ":1: step -1"},
		{"string value", good + good + `{"step":3,"data":{"x":"high"}}`, `:3: data field "x": string "high"`},
		{"null value", `{"step":3,"data":{"x":null}}`, `:1: data field "x": null is not a number`},
		{"trailing", `{"step":3,"data":{}} {}`, ":1: text after"},
		{"not json", "step:1 - a:2", ":1: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.jsonl")
			os.WriteFile(path, []byte(c.text), 0o644)
			recs, err := ReadJSONL(path)
			if err == nil || !strings.Contains(err.Error(), path+c.want) {
				t.Fatalf("error %v, want it to contain %q", err, path+c.want)
			}
			if want := strings.Count(c.text, good); len(recs) != want {
				t.Errorf("%d records before the bad line, want %d", len(recs), want)
			}
		})
	}
	if _, err := ReadJSONL(filepath.Join(t.TempDir(), "absent.jsonl")); err == nil || !strings.Contains(err.Error(), "absent.jsonl") {
		t.Errorf("missing file: %v", err)
	}
}

// TestJSONLDiskFull writes to /dev/full, which fails every write with
// ENOSPC as a full disk does.
func TestJSONLDiskFull(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	j, err := CreateJSONL("/dev/full")
	if err != nil {
		t.Fatal(err)
	}
	err = j.Log(7, map[string]float64{"a": 1})
	if err == nil || !strings.Contains(err.Error(), "metrics: jsonl sink /dev/full: step 7: ") || !strings.Contains(err.Error(), "no space left") {
		t.Errorf("full disk: %v", err)
	}
	j.Close()
	if err := j.Log(8, nil); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("Log after Close: %v", err)
	}
}

// FuzzReadJSONL: any input gives records or an error naming file and line,
// never a panic, and what it reads writes back to the same records.
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(`{"step":1,"data":{"a":1,"b":"NaN"}}` + "\n" + `{"step":2,"data":{}}`))
	f.Add([]byte(`{"step":1,"data":{"a":1e999}}`))
	f.Add([]byte(`{"step":"1","data":[]}`))
	f.Add([]byte("\n\n{\"step\":3,\"data\":{\"x\":-0}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := readJSONL(bytes.NewReader(data), "fuzz.jsonl")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "metrics: fuzz.jsonl:") {
				t.Fatalf("error without file and line: %v", err)
			}
			return
		}
		var out []byte
		for _, r := range recs {
			out = AppendJSONLine(out, r.Step, r.Data)
		}
		again, err := readJSONL(bytes.NewReader(out), "again")
		if err != nil || len(again) != len(recs) {
			t.Fatalf("rewritten records do not read back: %v", err)
		}
		for i := range recs {
			for k, v := range recs[i].Data {
				if !sameValue(again[i].Data[k], v) {
					t.Fatalf("record %d %q: %v then %v", i, k, v, again[i].Data[k])
				}
			}
		}
	})
}

// FuzzJSONString checks the key writer against encoding/json: the text must
// be valid JSON and decode to what encoding/json's own encoding decodes to.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"critic/score/mean", `q"b\s`, "tab\tnl\ncr\r\x00\x1f\x7f", "ünï/ß", "bad\xff\xfeutf8", "\u2028<>&", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var got, want string
		if err := json.Unmarshal(appendJSONString(nil, s), &got); err != nil {
			t.Fatalf("%q: invalid JSON %s: %v", s, appendJSONString(nil, s), err)
		}
		ref, _ := json.Marshal(s)
		json.Unmarshal(ref, &want)
		if got != want {
			t.Fatalf("%q decodes to %q, encoding/json's to %q", s, got, want)
		}
	})
}
