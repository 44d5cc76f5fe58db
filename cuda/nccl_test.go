package cuda

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ebitengine/purego"
)

// TestNCCLMissingLibrary: without libnccl the error names what to install.
func TestNCCLMissingLibrary(t *testing.T) {
	t.Setenv("R1GO_LIBNCCL", "/nonexistent/libnccl.so.2")
	l, err := loadNCCL()
	if err == nil {
		if l.lib.path == "/nonexistent/libnccl.so.2" {
			t.Fatal("a missing file loaded")
		}
		t.Skipf("NCCL is installed here (%s): the missing-library path is not reachable", l.lib.path)
	}
	for _, want := range []string{"NCCL is not installed", "/nonexistent/libnccl.so.2", "libnccl.so.2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if _, err := NewNCCLID(); err == nil {
		t.Error("NewNCCLID without NCCL returned no error")
	}
}

// TestRendezvousID hands one id to four ranks, rank 0 starting last.
func TestRendezvousID(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var want NCCLID
	for i := range want {
		want[i] = byte(i * 7)
	}
	const size = 4
	got := make([]NCCLID, size)
	errs := make([]error, size)
	var wg sync.WaitGroup
	for r := 1; r < size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[r] = RendezvousID(addr, r, size, &got[r], 10*time.Second)
		}()
	}
	time.Sleep(300 * time.Millisecond)
	got[0] = want
	errs[0] = RendezvousID(addr, 0, size, &got[0], 10*time.Second)
	wg.Wait()
	for r := range got {
		if errs[r] != nil {
			t.Fatalf("rank %d: %v", r, errs[r])
		}
		if got[r] != want {
			t.Fatalf("rank %d received another id", r)
		}
	}
	// A rank with no rank 0 gives up, naming the address.
	var id NCCLID
	err = RendezvousID(addr, 1, 2, &id, 300*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), addr) {
		t.Fatalf("rendezvous without rank 0: %v", err)
	}
}

// TestNCCLInitRankBinds checks that ncclCommInitRank's signature, with
// its 128-byte id passed by value, is one purego can bind (bound to a
// libc symbol here, never called; the call itself needs a GPU).
func TestNCCLInitRankBinds(t *testing.T) {
	h, err := purego.Dlopen("libc.so.6", purego.RTLD_NOW)
	if err != nil {
		t.Skip("no libc.so.6:", err)
	}
	sym, err := purego.Dlsym(h, "strlen")
	if err != nil {
		t.Fatal(err)
	}
	var l ncclLib
	purego.RegisterFunc(&l.initRank, sym) // panics on an unsupported signature
	if l.initRank == nil {
		t.Fatal("not bound")
	}
}
