package rl

import (
	"math"
	"strings"
	"testing"

	"github.com/r1go/r1go/env"
)

func TestCheckToolFaults(t *testing.T) {
	const url = "http://127.0.0.1:8000/retrieve"
	snap := func(calls, invalid int, kinds map[env.FaultKind]int) env.ToolSnapshot {
		var st env.ToolStats
		for i := 0; i < invalid; i++ {
			st.Add(env.CallInfo{ErrorKind: env.ErrJSON})
		}
		ok := calls - invalid
		for k, n := range kinds {
			for i := 0; i < n; i++ {
				ci := env.CallInfo{ErrorKind: env.ErrTool, Err: &env.ClientError{URL: url, Attempts: 1, Err: &env.StatusError{Code: 502}}}
				switch k {
				case env.FaultTimeout:
					ci.ErrorKind = env.ErrTimeout
				case env.FaultOther:
					ci = env.CallInfo{ErrorKind: env.ErrPanic}
				}
				st.Add(ci)
				ok--
			}
		}
		for i := 0; i < ok; i++ {
			st.Add(env.CallInfo{Success: true})
		}
		return st.Snapshot()
	}
	for _, tc := range []struct {
		name    string
		s       env.ToolSnapshot
		maxRate float64
		warn    string // "" for none
		fail    bool
	}{
		{"all fine", snap(8, 0, nil), 0, "", false},
		{"no calls", snap(0, 0, nil), 0.1, "", false},
		{"half failed is not more than half", snap(8, 0, map[env.FaultKind]int{env.FaultHTTP: 4}), 0, "", false},
		{"most timed out", snap(8, 0, map[env.FaultKind]int{env.FaultTimeout: 7}), 0, "7 of 8 tool calls failed (timeout 7 at " + url + ")", false},
		{"invalid calls are not tool faults", snap(8, 6, map[env.FaultKind]int{env.FaultHTTP: 1}), 0, "", false},
		{"mixed kinds", snap(6, 0, map[env.FaultKind]int{env.FaultHTTP: 3, env.FaultOther: 1}), 0, "4 of 6 tool calls failed (http 3 at " + url + "), 1 of other kinds", false},
		{"over the limit stops", snap(10, 0, map[env.FaultKind]int{env.FaultHTTP: 3}), 0.25, "", true},
		{"at the limit goes on", snap(4, 0, map[env.FaultKind]int{env.FaultHTTP: 1}), 0.25, "", false},
	} {
		warn, err := CheckToolFaults(12, tc.s, tc.maxRate)
		if (tc.warn == "") != (warn == "") || (tc.warn != "" && !strings.Contains(warn, tc.warn)) || !strings.HasPrefix(warn+"warning: ", "warning: ") {
			t.Errorf("%s: warning %q, want one containing %q", tc.name, warn, tc.warn)
		}
		if (err != nil) != tc.fail {
			t.Errorf("%s: error %v", tc.name, err)
		}
		if err != nil && (!strings.Contains(err.Error(), "trainer.max_tool_error_rate") || !strings.Contains(err.Error(), "step 12")) {
			t.Errorf("%s: error text %q", tc.name, err)
		}
	}
	for _, bad := range []float64{-0.1, 1.5, math.NaN()} {
		if _, err := CheckToolFaults(1, snap(1, 0, nil), bad); err == nil {
			t.Errorf("max rate %v accepted", bad)
		}
	}
}
