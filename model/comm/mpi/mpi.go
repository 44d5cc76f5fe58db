// Package mpi is the Comm of the CPU device: Open MPI's libmpi, loaded at
// run time through purego, so the build stays pure Go and a run of one
// process never needs the library. The central type is Comm, one process's
// membership of MPI_COMM_WORLD.
//
// Errors: a library that is missing or too old is an error that names the
// files tried; MPI calls run with MPI_ERRORS_RETURN, and a failing call is
// an error naming the call and the library's own message. A length
// mismatch between ranks' buffers is the caller's bug and panics.
//
// Every MPI call runs on one goroutine locked to one OS thread (MPI's
// "funneled" threading), so the Go scheduler may move callers freely.
package mpi

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
	"github.com/r1go/r1go/model/cpu"
)

// Open MPI's C handles (MPI_COMM_WORLD, MPI_FLOAT, MPI_SUM, ...) are the
// addresses of global objects the library exports, so they are looked up
// with dlsym rather than being integer constants as in MPICH.
type lib struct {
	path                                         string
	initThread, finalize, finalized, rank, size  uintptr
	allreduce, reduceScatter, allgather, bcast   uintptr
	barrier, setErrhandler, errorString, abort   uintptr
	split, free                                  uintptr
	commWorld, float, byte_, opSum, errorsReturn uintptr
}

// inPlace is Open MPI's MPI_IN_PLACE, (void *) 1.
const inPlace = 1

// threadFunneled is MPI_THREAD_FUNNELED in Open MPI's mpi.h.
const threadFunneled = 1

func load() (*lib, error) {
	names := []string{"libmpi.so.40", "libmpi.so"}
	if p := os.Getenv("R1GO_LIBMPI"); p != "" {
		names = append([]string{p}, names...)
	}
	var fails []string
	var h uintptr
	l := &lib{}
	for _, n := range names {
		var err error
		if h, err = purego.Dlopen(n, purego.RTLD_NOW|purego.RTLD_GLOBAL); err == nil {
			l.path = n
			break
		}
		fails = append(fails, err.Error())
	}
	if l.path == "" {
		return nil, fmt.Errorf("mpi: Open MPI is not installed (apt-get install openmpi-bin libopenmpi3): %s", strings.Join(fails, "; "))
	}
	for _, s := range []struct {
		name string
		dst  *uintptr
	}{
		{"MPI_Init_thread", &l.initThread}, {"MPI_Finalize", &l.finalize}, {"MPI_Finalized", &l.finalized},
		{"MPI_Comm_rank", &l.rank}, {"MPI_Comm_size", &l.size}, {"MPI_Allreduce", &l.allreduce},
		{"MPI_Reduce_scatter_block", &l.reduceScatter}, {"MPI_Allgather", &l.allgather}, {"MPI_Bcast", &l.bcast},
		{"MPI_Barrier", &l.barrier}, {"MPI_Comm_set_errhandler", &l.setErrhandler}, {"MPI_Error_string", &l.errorString},
		{"MPI_Abort", &l.abort}, {"MPI_Comm_split", &l.split}, {"MPI_Comm_free", &l.free},
		{"ompi_mpi_comm_world", &l.commWorld}, {"ompi_mpi_float", &l.float}, {"ompi_mpi_byte", &l.byte_},
		{"ompi_mpi_op_sum", &l.opSum}, {"ompi_mpi_errors_return", &l.errorsReturn},
	} {
		p, err := purego.Dlsym(h, s.name)
		if err != nil {
			return nil, fmt.Errorf("mpi: %s has no symbol %s (not Open MPI ≥ 3?): %v", l.path, s.name, err)
		}
		*s.dst = p
	}
	return l, nil
}

// Comm is this process in MPI_COMM_WORLD, or in a communicator Split
// from it, for buffers of the CPU device.
type Comm struct {
	l          *lib
	comm       uintptr // the MPI_Comm handle
	world      bool    // MPI_COMM_WORLD: Close finalises MPI
	rank, size int
	calls      chan func() // served by one locked thread, shared with the split communicators
}

// Open loads Open MPI, initialises it and joins MPI_COMM_WORLD. Call it
// once per process, in a process started by mpirun or srun.
//
// A rank waiting in a collective yields its core while it polls
// (mpi_yield_when_idle, unless the environment sets it): Open MPI's
// default busy poll takes the core from the process's own compute
// threads, which the Go runtime runs beside the waiting one, such as a
// rollout rank's generation while it waits for the next weights. On 2
// cores it cost a synchronous 2-rank run 13 % of its tokens/s and a run
// with a rollout rank 40 %.
func Open() (*Comm, error) {
	if _, set := os.LookupEnv("OMPI_MCA_mpi_yield_when_idle"); !set {
		os.Setenv("OMPI_MCA_mpi_yield_when_idle", "1") // read by MPI_Init_thread
	}
	l, err := load()
	if err != nil {
		return nil, err
	}
	c := &Comm{l: l, comm: l.commWorld, world: true, calls: make(chan func())}
	go c.serve()
	err = c.do("MPI_Init_thread", func() uintptr {
		var provided int32
		return c.call(l.initThread, 0, 0, threadFunneled, uintptr(unsafe.Pointer(&provided)))
	})
	if err != nil {
		return nil, err
	}
	if err := c.do("MPI_Comm_set_errhandler", func() uintptr { return c.call(l.setErrhandler, l.commWorld, l.errorsReturn) }); err != nil {
		return nil, err
	}
	var r, s int32
	if err := c.do("MPI_Comm_rank", func() uintptr { return c.call(l.rank, l.commWorld, uintptr(unsafe.Pointer(&r))) }); err != nil {
		return nil, err
	}
	if err := c.do("MPI_Comm_size", func() uintptr { return c.call(l.size, l.commWorld, uintptr(unsafe.Pointer(&s))) }); err != nil {
		return nil, err
	}
	c.rank, c.size = int(r), int(s)
	return c, nil
}

// serve runs every MPI call on one locked OS thread.
func (c *Comm) serve() {
	runtime.LockOSThread()
	for f := range c.calls {
		f()
	}
}

func (c *Comm) call(fn uintptr, args ...uintptr) uintptr {
	r, _, _ := purego.SyscallN(fn, args...)
	return r
}

// do runs f on the MPI thread and turns a non-zero return into an error.
func (c *Comm) do(name string, f func() uintptr) error {
	done := make(chan uintptr)
	c.calls <- func() { done <- f() }
	if code := int32(<-done); code != 0 {
		return fmt.Errorf("mpi: %s failed on rank %d: %s (code %d)", name, c.rank, c.errorString(code), code)
	}
	return nil
}

func (c *Comm) errorString(code int32) string {
	buf := make([]byte, 256) // MPI_MAX_ERROR_STRING
	var n int32
	done := make(chan struct{})
	c.calls <- func() {
		c.call(c.l.errorString, uintptr(code), uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&n)))
		close(done)
	}
	<-done
	return string(buf[:max(0, min(int(n), len(buf)))])
}

// Rank is this process's rank in the communicator.
func (c *Comm) Rank() int { return c.rank }

// Size is the number of processes in the communicator.
func (c *Comm) Size() int { return c.size }

// Split divides c's ranks by color (MPI_Comm_split): every rank calls it,
// and each gets the communicator of the ranks that passed its color,
// ranked by key, then by their rank in c. Its calls run on c's thread;
// Close frees it and leaves c open.
func (c *Comm) Split(color, key int) (*Comm, error) {
	var h uintptr
	err := c.do("MPI_Comm_split", func() uintptr {
		return c.call(c.l.split, c.comm, uintptr(color), uintptr(key), uintptr(unsafe.Pointer(&h)))
	})
	if err != nil {
		return nil, err
	}
	s := &Comm{l: c.l, comm: h, calls: c.calls}
	if err := s.do("MPI_Comm_set_errhandler", func() uintptr { return s.call(s.l.setErrhandler, h, s.l.errorsReturn) }); err != nil {
		return nil, err
	}
	var r, n int32
	if err := s.do("MPI_Comm_rank", func() uintptr { return s.call(s.l.rank, h, uintptr(unsafe.Pointer(&r))) }); err != nil {
		return nil, err
	}
	if err := s.do("MPI_Comm_size", func() uintptr { return s.call(s.l.size, h, uintptr(unsafe.Pointer(&n))) }); err != nil {
		return nil, err
	}
	s.rank, s.size = int(r), int(n)
	return s, nil
}

// host returns the CPU buffer's memory; the MPI comm serves only the CPU
// device.
func host(b model.Buffer) []float32 {
	s, ok := cpu.HostFloat32(b)
	if !ok {
		panic(fmt.Sprintf("mpi: a %T is not a CPU device buffer", b))
	}
	return s
}

func ptr(x []float32) uintptr {
	if len(x) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&x[0]))
}

// AllReduce sums buf over the ranks, in place.
func (c *Comm) AllReduce(buf model.Buffer) error {
	x := host(buf)
	if len(x) == 0 {
		return nil
	}
	err := c.do("MPI_Allreduce", func() uintptr {
		return c.call(c.l.allreduce, inPlace, ptr(x), uintptr(len(x)), c.l.float, c.l.opSum, c.comm)
	})
	runtime.KeepAlive(x)
	return err
}

// ReduceScatter sums src over the ranks and leaves chunk Rank in dst.
func (c *Comm) ReduceScatter(dst, src model.Buffer) error {
	d, s := host(dst), host(src)
	comm.CheckCollective("ReduceScatter", len(d), len(s), c.size)
	err := c.do("MPI_Reduce_scatter_block", func() uintptr {
		return c.call(c.l.reduceScatter, ptr(s), ptr(d), uintptr(len(d)), c.l.float, c.l.opSum, c.comm)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(d)
	return err
}

// AllGather concatenates every rank's src into dst, rank order.
func (c *Comm) AllGather(dst, src model.Buffer) error {
	d, s := host(dst), host(src)
	comm.CheckCollective("AllGather", len(s), len(d), c.size)
	err := c.do("MPI_Allgather", func() uintptr {
		return c.call(c.l.allgather, ptr(s), uintptr(len(s)), c.l.float, ptr(d), uintptr(len(s)), c.l.float, c.comm)
	})
	runtime.KeepAlive(s)
	runtime.KeepAlive(d)
	return err
}

// Broadcast copies root's buf to every rank.
func (c *Comm) Broadcast(buf model.Buffer, root int) error {
	x := host(buf)
	err := c.do("MPI_Bcast", func() uintptr {
		return c.call(c.l.bcast, ptr(x), uintptr(len(x)), c.l.float, uintptr(root), c.comm)
	})
	runtime.KeepAlive(x)
	return err
}

// Barrier returns when every rank has called it.
func (c *Comm) Barrier() error {
	return c.do("MPI_Barrier", func() uintptr { return c.call(c.l.barrier, c.comm) })
}

// GatherBytes all-gathers equal-length host bytes, rank order.
func (c *Comm) GatherBytes(src []byte) ([]byte, error) {
	out := make([]byte, len(src)*c.size)
	if len(src) == 0 {
		return out, nil
	}
	err := c.do("MPI_Allgather", func() uintptr {
		return c.call(c.l.allgather, uintptr(unsafe.Pointer(&src[0])), uintptr(len(src)), c.l.byte_,
			uintptr(unsafe.Pointer(&out[0])), uintptr(len(src)), c.l.byte_, c.comm)
	})
	runtime.KeepAlive(src)
	return out, err
}

// Close finalises MPI (MPI_COMM_WORLD's Comm, after every Split one's
// Close) or frees a split communicator; the Comm is unusable after it.
func (c *Comm) Close() error {
	if !c.world {
		h := c.comm
		return c.do("MPI_Comm_free", func() uintptr { return c.call(c.l.free, uintptr(unsafe.Pointer(&h))) })
	}
	err := c.do("MPI_Finalize", func() uintptr { return c.call(c.l.finalize) })
	close(c.calls)
	return err
}

var _ model.Comm = (*Comm)(nil)
