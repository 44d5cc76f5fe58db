package cuda

import (
	"fmt"
	"unsafe"

	"github.com/ebitengine/purego"
	"github.com/r1go/r1go/model"
	"github.com/r1go/r1go/model/comm"
)

// NCCL is the Comm of the CUDA device: NVIDIA's collective library,
// libnccl.so.2, loaded at run time like the driver. Every collective is
// queued on the device's one stream, so it runs after the backward pass
// that wrote the gradients and before the optimizer that reads them,
// without a host wait. One process drives one GPU.

// NCCLID is ncclUniqueId: rank 0 makes it, every other rank must receive
// it (over MPI, or the TCP rendezvous of RendezvousID) before OpenNCCL.
type NCCLID [128]byte

// ncclUniqueID is the C struct, passed by value to ncclCommInitRank.
type ncclUniqueID struct{ Internal [128]byte }

// NCCL enums (nccl.h).
const (
	ncclUint8   = 1
	ncclFloat32 = 7
	ncclBF16    = 9
	ncclSum     = 0
)

type ncclLib struct {
	lib                                            library
	getUniqueID, commDestroy, errorString          uintptr
	allReduce, reduceScatter, allGather, broadcast uintptr
	initRank                                       func(comm *uintptr, n int32, id ncclUniqueID, rank int32) int32
}

// loadNCCL opens libnccl.so.2 (R1GO_LIBNCCL first when set).
func loadNCCL() (*ncclLib, error) {
	lib, err := openFirst(searchNames("R1GO_LIBNCCL", "libnccl.so.2", "libnccl.so"))
	if err != nil {
		return nil, fmt.Errorf("cuda: NCCL is not installed (libnccl.so.2; pip's nvidia-nccl-cu12 or NVIDIA's libnccl2 package provide it): %w", err)
	}
	l := &ncclLib{lib: lib}
	var initRank uintptr
	if err := lib.bindAll([]binding{
		bind(&l.getUniqueID, "ncclGetUniqueId"), bind(&initRank, "ncclCommInitRank"),
		bind(&l.commDestroy, "ncclCommDestroy"), bind(&l.errorString, "ncclGetErrorString"),
		bind(&l.allReduce, "ncclAllReduce"), bind(&l.reduceScatter, "ncclReduceScatter"),
		bind(&l.allGather, "ncclAllGather"), bind(&l.broadcast, "ncclBroadcast"),
	}); err != nil {
		return nil, err
	}
	// The unique id is a 128-byte struct passed by value: purego's
	// RegisterFunc lays it out as the C ABI does.
	purego.RegisterFunc(&l.initRank, initRank)
	return l, nil
}

func (l *ncclLib) check(code int, what string) error {
	if code == 0 {
		return nil
	}
	msg := "unknown"
	if p := callPtr(l.errorString, uintptr(code)); p != 0 {
		msg = cString(p)
	}
	return fmt.Errorf("cuda: %s failed: %s (ncclResult %d)", what, msg, code)
}

// NewNCCLID makes the run's unique id (rank 0 calls it).
func NewNCCLID() (NCCLID, error) {
	l, err := loadNCCL()
	if err != nil {
		return NCCLID{}, err
	}
	var id NCCLID
	return id, l.check(call(l.getUniqueID, uintptr(unsafe.Pointer(&id[0]))), "ncclGetUniqueId")
}

// NCCL is one rank's communicator on one GPU.
type NCCL struct {
	dev        *Device
	l          *ncclLib
	comm       uintptr
	rank, size int
	ss         *sideStream // the second stream of ReduceScatterAsync (nccl_stream.go); nil until used
}

// OpenNCCL joins the communicator of size ranks named by id as rank, on
// dev. Every rank calls it; it returns when all have.
func OpenNCCL(dev *Device, rank, size int, id NCCLID) (*NCCL, error) {
	l, err := loadNCCL()
	if err != nil {
		return nil, err
	}
	c := &NCCL{dev: dev, l: l, rank: rank, size: size}
	func() {
		defer dev.enter()()
		err = l.check(int(l.initRank(&c.comm, int32(size), ncclUniqueID{Internal: id}, int32(rank))), "ncclCommInitRank")
	}()
	if err != nil {
		return nil, fmt.Errorf("%w (rank %d of %d)", err, rank, size)
	}
	return c, nil
}

func (c *NCCL) Rank() int { return c.rank }
func (c *NCCL) Size() int { return c.size }

// ncclType is the NCCL element type of a buffer.
func ncclType(b Buffer) uintptr {
	if b.dtype == BF16 {
		return ncclBF16
	}
	return ncclFloat32
}

func (c *NCCL) buf(b model.Buffer) Buffer {
	x, ok := b.(Buffer)
	if !ok {
		panic(fmt.Sprintf("cuda: NCCL collective on a %T, not a CUDA buffer", b))
	}
	return x
}

// AllReduce sums buf over the ranks, in place, on the device's stream.
func (c *NCCL) AllReduce(buf model.Buffer) error {
	b := c.buf(buf)
	defer c.dev.enter()()
	return c.l.check(call(c.l.allReduce, b.ptr, b.ptr, uintptr(b.n), ncclType(b), ncclSum, c.comm, c.dev.stream), "ncclAllReduce")
}

// ReduceScatter sums src over the ranks and leaves chunk Rank in dst.
func (c *NCCL) ReduceScatter(dst, src model.Buffer) error {
	d, s := c.buf(dst), c.buf(src)
	comm.CheckCollective("ReduceScatter", d.n, s.n, c.size)
	defer c.dev.enter()()
	return c.l.check(call(c.l.reduceScatter, s.ptr, d.ptr, uintptr(d.n), ncclType(d), ncclSum, c.comm, c.dev.stream), "ncclReduceScatter")
}

// AllGather concatenates every rank's src into dst.
func (c *NCCL) AllGather(dst, src model.Buffer) error {
	d, s := c.buf(dst), c.buf(src)
	comm.CheckCollective("AllGather", s.n, d.n, c.size)
	defer c.dev.enter()()
	if err := c.l.check(call(c.l.allGather, s.ptr, d.ptr, uintptr(s.n), ncclType(s), c.comm, c.dev.stream), "ncclAllGather"); err != nil {
		return err
	}
	c.dev.refresh(d.ptr, d.n) // gathered master weights (ZeRO-1): their bf16 compute copy follows
	return nil
}

// Broadcast copies root's buf to every rank.
func (c *NCCL) Broadcast(buf model.Buffer, root int) error {
	b := c.buf(buf)
	defer c.dev.enter()()
	if err := c.l.check(call(c.l.broadcast, b.ptr, b.ptr, uintptr(b.n), ncclType(b), uintptr(root), c.comm, c.dev.stream), "ncclBroadcast"); err != nil {
		return err
	}
	c.dev.refresh(b.ptr, b.n) // broadcast master weights: their bf16 compute copy follows
	return nil
}

// Barrier all-reduces one value and waits for it.
func (c *NCCL) Barrier() error {
	one := c.dev.Alloc(1)
	defer c.dev.Free(one)
	if err := c.AllReduce(one); err != nil {
		return err
	}
	return c.dev.Sync()
}

// GatherBytes all-gathers host bytes through device memory.
func (c *NCCL) GatherBytes(src []byte) ([]byte, error) {
	words := (len(src) + 3) / 4
	out := make([]byte, len(src)*c.size)
	if words == 0 {
		return out, nil
	}
	in := make([]float32, words)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&in[0])), 4*words), src)
	s, d := c.dev.Alloc(words).(Buffer), c.dev.Alloc(words*c.size).(Buffer)
	defer c.dev.Free(s)
	defer c.dev.Free(d)
	c.dev.Upload(s, in)
	err := func() error {
		defer c.dev.enter()()
		return c.l.check(call(c.l.allGather, s.ptr, d.ptr, uintptr(4*words), ncclUint8, c.comm, c.dev.stream), "ncclAllGather")
	}()
	if err != nil {
		return nil, err
	}
	all := make([]float32, words*c.size)
	c.dev.Download(all, d)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&all[0])), 4*len(all))
	for r := 0; r < c.size; r++ {
		copy(out[r*len(src):(r+1)*len(src)], raw[r*4*words:])
	}
	return out, c.dev.Sync()
}

// Close destroys the communicator.
func (c *NCCL) Close() error {
	if err := c.dev.Sync(); err != nil {
		return err
	}
	if c.ss != nil { // the second stream: its work was waited for by the device's stream
		func() {
			defer c.dev.enter()()
			call(c.dev.drv.cuStreamDestroy, c.ss.stream)
		}()
	}
	return c.l.check(call(c.l.commDestroy, c.comm), "ncclCommDestroy")
}

var _ model.Comm = (*NCCL)(nil)
