package model

// Comm is the seam between data-parallel training and the transport that
// links the processes of one run (package model/comm holds the launch,
// the one-process Single and the heartbeat; model/comm/mpi and cuda's
// NCCL implement it): collectives on device buffers of float32
// (MPI for the CPU device, NCCL for the CUDA device) and a barrier. Every
// rank calls every collective in the same order with the same lengths;
// a length mismatch is a programmer error and panics, a transport failure
// (a rank that died, a network error) is returned.
type Comm interface {
	Rank() int // this process, 0 ≤ Rank < Size
	Size() int // processes in the run

	// AllReduce sums buf over the ranks, in place.
	AllReduce(buf Buffer) error
	// ReduceScatter sums src (Size·dst.Len() values) over the ranks and
	// leaves chunk Rank of the sum in dst.
	ReduceScatter(dst, src Buffer) error
	// AllGather concatenates every rank's src into dst (Size·src.Len()
	// values), rank order.
	AllGather(dst, src Buffer) error
	// Broadcast copies root's buf into every rank's buf.
	Broadcast(buf Buffer, root int) error
	Barrier() error

	// GatherBytes is the host control plane: every rank passes the same
	// number of bytes and receives all ranks' bytes, rank order. Metrics,
	// counts and per-token batch data travel this way; float64 bits
	// travel unchanged.
	GatherBytes(src []byte) ([]byte, error)

	Close() error
}

// AsyncComm is a Comm that can queue a reduce-scatter behind the device's
// work and return at once (NCCL on a second stream): ZeRO-2 uses it to
// overlap gradient buckets with the backward without a goroutine. wait
// orders what the device does next (and, through the device's Sync or a
// download, the host) after the collective; it must be called before dst
// is read or src written again.
type AsyncComm interface {
	Comm
	ReduceScatterAsync(dst, src Buffer) (wait func() error, err error)
}
