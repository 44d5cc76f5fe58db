package mpi

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/cpu"
)

// MPIRun returns the mpirun command line that starts n copies of args, or
// skips the test when Open MPI is not installed.
func mpirun(t *testing.T, n int, args ...string) *exec.Cmd {
	t.Helper()
	bin, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun is not installed (apt-get install openmpi-bin libopenmpi3; .ci/run does it)")
	}
	a := []string{"--oversubscribe", "--allow-run-as-root", "-np", fmt.Sprint(n)}
	return exec.Command(bin, append(a, args...)...)
}

// TestCollectivesUnderMPIRun starts this test binary on three ranks and
// checks every collective against the sums it must produce.
func TestCollectivesUnderMPIRun(t *testing.T) {
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		t.Skip("the child of this test")
	}
	cmd := mpirun(t, 3, os.Args[0], "-test.run", "^TestMPIChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), "R1GO_MPI_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("mpirun: %v\n%s", err, out)
	}
	if got := strings.Count(string(out), "child ok"); got != 3 {
		t.Fatalf("%d of 3 ranks reported success:\n%s", got, out)
	}
}

func TestMPIChild(t *testing.T) {
	if os.Getenv("R1GO_MPI_CHILD") == "" {
		t.Skip("run by TestCollectivesUnderMPIRun under mpirun")
	}
	l, err := comm.LaunchFromEnv()
	if err != nil || l.Launcher != "mpirun" {
		t.Fatalf("launch %+v, %v", l, err)
	}
	c, err := Open()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Rank() != l.Rank || c.Size() != l.Size || c.Size() != 3 {
		t.Fatalf("MPI says rank %d of %d, the environment %d of %d", c.Rank(), c.Size(), l.Rank, l.Size)
	}
	dev := cpu.New()
	r, n := float32(c.Rank()), c.Size()
	// All-reduce: element i of rank r is r+i; the sum is Σr + n·i.
	x := dev.Alloc(5)
	xs, _ := cpu.HostFloat32(x)
	for i := range xs {
		xs[i] = r + float32(i)
	}
	if err := c.AllReduce(x); err != nil {
		t.Fatal(err)
	}
	for i, v := range xs {
		if want := float32(0+1+2) + float32(n*i); v != want {
			t.Fatalf("all-reduce[%d] = %v, want %v", i, v, want)
		}
	}
	// Reduce-scatter of 2 values per rank: rank r gets chunk r of the sum.
	src := dev.Alloc(2 * n)
	ss, _ := cpu.HostFloat32(src)
	for i := range ss {
		ss[i] = float32(i) * (r + 1)
	}
	dst := dev.Alloc(2)
	if err := c.ReduceScatter(dst, src); err != nil {
		t.Fatal(err)
	}
	ds, _ := cpu.HostFloat32(dst)
	for j, v := range ds {
		if want := float32(2*c.Rank()+j) * 6; v != want {
			t.Fatalf("reduce-scatter[%d] = %v, want %v", j, v, want)
		}
	}
	// All-gather and broadcast.
	all := dev.Alloc(2 * n)
	if err := c.AllGather(all, dst); err != nil {
		t.Fatal(err)
	}
	as, _ := cpu.HostFloat32(all)
	for i, v := range as {
		if v != float32(i)*6 {
			t.Fatalf("all-gather[%d] = %v, want %v", i, v, float32(i)*6)
		}
	}
	b := dev.Alloc(3)
	bs, _ := cpu.HostFloat32(b)
	for i := range bs {
		bs[i] = r*10 + float32(i)
	}
	if err := c.Broadcast(b, 2); err != nil {
		t.Fatal(err)
	}
	if bs[0] != 20 || bs[2] != 22 {
		t.Fatalf("broadcast from rank 2 gave %v", bs)
	}
	parts, err := comm.GatherVar(c, []byte(strings.Repeat("x", c.Rank()+1)))
	if err != nil {
		t.Fatal(err)
	}
	for k, p := range parts {
		if string(p) != strings.Repeat("x", k+1) {
			t.Fatalf("gathered %q from rank %d", p, k)
		}
	}
	s, err := comm.SumFloat64s(c, []float64{0.1 * float64(c.Rank()+1)})
	if err != nil || s[0] != 0.1+0.2+0.30000000000000004 {
		t.Fatalf("float64 sum %v, %v", s, err)
	}
	// Split: ranks 0 and 1 (color 0, ranked in reverse by key) and rank 2
	// alone; a sum over each part, while the world stays usable.
	color := c.Rank() / 2
	sub, err := c.Split(color, -c.Rank())
	if err != nil {
		t.Fatal(err)
	}
	if wantSize := 2 - color; sub.Size() != wantSize || sub.Rank() != [...]int{1, 0, 0}[c.Rank()] {
		t.Fatalf("rank %d: split gives rank %d of %d", c.Rank(), sub.Rank(), sub.Size())
	}
	y := dev.Alloc(1)
	ys, _ := cpu.HostFloat32(y)
	ys[0] = r + 1
	if err := sub.AllReduce(y); err != nil {
		t.Fatal(err)
	}
	if want := [...]float32{3, 3, 3}[c.Rank()]; ys[0] != want {
		t.Fatalf("rank %d: the sum over its part is %v, want %v", c.Rank(), ys[0], want)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(); err != nil {
		t.Fatal(err)
	}
	fmt.Println("child ok", c.Rank())
}

// TestMissingLibrary names the library that did not load.
func TestMissingLibrary(t *testing.T) {
	t.Setenv("R1GO_LIBMPI", "/nonexistent/libmpi.so")
	if _, err := load(); err == nil {
		// The real library loaded after the missing one: the path is tried first.
		return
	} else if !strings.Contains(err.Error(), "/nonexistent/libmpi.so") {
		t.Fatalf("error does not name the library tried: %v", err)
	}
}
