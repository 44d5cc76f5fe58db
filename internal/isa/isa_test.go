package isa

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in     string
		want   Tier
		native bool
		bad    bool
	}{
		{"", AVX512, true, false}, {"native", AVX512, true, false}, {"AVX2", AVX2, false, false},
		{" generic ", Generic, false, false}, {"avx512", AVX512, false, false}, {"sse", AVX512, true, true},
	} {
		got, native, err := Parse(tc.in)
		if got != tc.want || native != tc.native || (err != nil) != tc.bad {
			t.Errorf("Parse(%q) = %v, %v, %v; want %v, %v, error %v", tc.in, got, native, err, tc.want, tc.native, tc.bad)
		}
		if err != nil && !strings.Contains(err.Error(), "R1GO_CPU") {
			t.Errorf("Parse(%q)'s error %q does not name the variable", tc.in, err)
		}
	}
}

func TestCappedTurnsOffEveryExtensionAbove(t *testing.T) {
	all := Features{true, true, true, true, true, true, true, true, true, true}
	if got := all.capped(AVX512); got != all {
		t.Errorf("capped(avx512) = %+v, want everything kept", got)
	}
	if got := all.capped(AVX2); got != (Features{AVX: true, AVX2: true, FMA: true}) {
		t.Errorf("capped(avx2) = %+v, want AVX, AVX2 and FMA only", got)
	}
	if got := all.capped(Generic); got != (Features{}) {
		t.Errorf("capped(generic) = %+v, want nothing", got)
	}
	if all.best() != AVX512 || all.capped(AVX2).best() != AVX2 || (Features{AVX2: true}).best() != Generic {
		t.Error("best does not rank the capped sets as their tiers")
	}
}

// TestTierInForce runs this test binary again under each R1GO_CPU value
// and reads back the tier and flags the child saw at start-up.
func TestTierInForce(t *testing.T) {
	if os.Getenv("ISA_CHILD") == "1" {
		f := X86
		avx512 := f.AVX512F || f.AVX512BW || f.AVX512DQ || f.AVX512VL || f.AVX512BF16 || f.AMXTile || f.AMXBF16
		avx2 := f.AVX || f.AVX2 || f.FMA
		os.Stdout.WriteString("tier=" + Current().String())
		if avx512 {
			os.Stdout.WriteString(" avx512-flags")
		}
		if avx2 {
			os.Stdout.WriteString(" avx2-flags")
		}
		os.Stdout.WriteString("\n")
		return
	}
	if testing.Short() {
		t.Skip("runs child processes")
	}
	t.Logf("%s; supported %v", Describe(), Supported())
	for _, tc := range []struct {
		env  string
		want Tier
	}{{"", Machine}, {"avx512", Machine}, {"avx2", min(AVX2, Machine)}, {"generic", Generic}, {"bogus", Machine}} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestTierInForce$")
		cmd.Env = append(os.Environ(), "ISA_CHILD=1", "R1GO_CPU="+tc.env)
		out, err := cmd.CombinedOutput()
		if errors.Is(err, syscall.ENOEXEC) {
			// A test binary of another architecture, run by qemu-user
			// without binfmt_misc, cannot start itself again.
			t.Skipf("cannot run the test binary as a child: %v", err)
		}
		if err != nil {
			t.Fatalf("R1GO_CPU=%q: %v\n%s", tc.env, err, out)
		}
		s := string(out)
		if !strings.Contains(s, "tier="+tc.want.String()+" ") && !strings.Contains(s, "tier="+tc.want.String()+"\n") {
			t.Errorf("R1GO_CPU=%q: child says %q, want tier %v", tc.env, s, tc.want)
		}
		if tc.want < AVX512 && strings.Contains(s, "avx512-flags") {
			t.Errorf("R1GO_CPU=%q: AVX-512 flags left on: %q", tc.env, s)
		}
		if tc.want < AVX2 && strings.Contains(s, "avx2-flags") {
			t.Errorf("R1GO_CPU=%q: AVX2 flags left on: %q", tc.env, s)
		}
		if tc.env == "bogus" && !strings.Contains(s, `R1GO_CPU="bogus"`) {
			t.Errorf("R1GO_CPU=bogus: no warning naming it in %q", s)
		}
	}
}
