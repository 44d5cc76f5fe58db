package cuda

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/r1go/r1go/internal/bf16"
)

// TestGPUNCCLWorldOne runs every collective of the NCCL communicator for
// real, on a GPU with libnccl, in a world of one rank: sums and gathers
// over one rank are copies, so each output must equal its input bit for
// bit, in float32 and bf16, on the device's stream and on the second
// stream of ReduceScatterAsync. It skips where NCCL is absent (CI, the
// emulator); the unique id comes from the library itself.
func TestGPUNCCLWorldOne(t *testing.T) {
	dev := gpuOrSkip(t)
	if _, err := loadNCCL(); err != nil {
		t.Skip("no NCCL here:", err)
	}
	id, err := NewNCCLID()
	if err != nil {
		t.Fatal(err)
	}
	c, err := OpenNCCL(dev, 0, 1, id)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 1<<20 + 3
	for _, dt := range []DType{F32, BF16} {
		want := make([]float32, n)
		for i := range want {
			want[i] = float32(rng.NormFloat64())
			if dt == BF16 {
				want[i] = bf16.Round(want[i])
			}
		}
		fresh := func() Buffer {
			b := dev.AllocType(n, dt)
			dev.Upload(b, want)
			return b
		}
		check := func(what string, b Buffer) {
			t.Helper()
			if err := dev.Sync(); err != nil {
				t.Fatalf("%s %v: %v", what, dt, err)
			}
			got := make([]float32, n)
			if dt == BF16 {
				got = downloadBF16(dev, b)
			} else {
				dev.Download(got, b)
			}
			for i := range want {
				if got[i] != want[i] {
					t.Fatalf("%s %v: [%d] = %g, want %g", what, dt, i, got[i], want[i])
				}
			}
		}
		x := fresh()
		if err := c.AllReduce(x); err != nil {
			t.Fatal(err)
		}
		check("AllReduce", x)
		if err := c.Broadcast(x, 0); err != nil {
			t.Fatal(err)
		}
		check("Broadcast", x)
		for _, async := range []bool{false, true} {
			dst := dev.AllocType(n, dt)
			if async {
				wait, err := c.ReduceScatterAsync(dst, x)
				if err != nil {
					t.Fatal(err)
				}
				if err := wait(); err != nil {
					t.Fatal(err)
				}
			} else if err := c.ReduceScatter(dst, x); err != nil {
				t.Fatal(err)
			}
			check(map[bool]string{false: "ReduceScatter", true: "ReduceScatterAsync"}[async], dst)
			dev.Free(dst)
		}
		g := dev.AllocType(n, dt)
		if err := c.AllGather(g, x); err != nil {
			t.Fatal(err)
		}
		check("AllGather", g)
		dev.Free(g)
		dev.Free(x)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	msg := []byte("rank 0 of 1: seven bytes and more")
	got, err := c.GatherBytes(msg)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("GatherBytes = %q, want %q", got, msg)
	}
	t.Logf("NCCL world of one: AllReduce, Broadcast, ReduceScatter (both streams), AllGather of %d float32 and bf16 values, Barrier, GatherBytes: exact", n)
}
