package cuda

import (
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// RendezvousID hands rank 0's NCCL id to the other ranks over TCP, the
// way torchrun's ranks meet: rank 0 listens on addr (MASTER_ADDR:
// MASTER_PORT) and sends the id to each of the size-1 ranks that connect;
// they dial until timeout (rank 0 may start last). On rank 0 id holds the
// id to send; elsewhere it receives it.
func RendezvousID(addr string, rank, size int, id *NCCLID, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	if rank == 0 {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("cuda: NCCL rendezvous: rank 0 cannot listen on %s: %w", addr, err)
		}
		defer ln.Close()
		ln.(*net.TCPListener).SetDeadline(deadline)
		for k := 1; k < size; k++ {
			conn, err := ln.Accept()
			if err != nil {
				return fmt.Errorf("cuda: NCCL rendezvous: %d of %d ranks connected to %s: %w", k-1, size-1, addr, err)
			}
			conn.SetWriteDeadline(deadline)
			_, err = conn.Write(id[:])
			conn.Close()
			if err != nil {
				return fmt.Errorf("cuda: NCCL rendezvous: sending the id: %w", err)
			}
		}
		return nil
	}
	for {
		conn, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			conn.SetReadDeadline(deadline)
			_, err = io.ReadFull(conn, id[:])
			conn.Close()
			if err != nil {
				return fmt.Errorf("cuda: NCCL rendezvous: rank %d reading the id from %s: %w", rank, addr, err)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cuda: NCCL rendezvous: rank %d found no rank 0 at %s within %s: %w", rank, addr, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// RendezvousAddr is MASTER_ADDR:MASTER_PORT, as torchrun sets them.
func RendezvousAddr() (string, error) {
	host, port := os.Getenv("MASTER_ADDR"), os.Getenv("MASTER_PORT")
	if host == "" || port == "" {
		return "", fmt.Errorf("cuda: NCCL rendezvous needs MASTER_ADDR and MASTER_PORT (got %q, %q)", host, port)
	}
	return net.JoinHostPort(host, port), nil
}
