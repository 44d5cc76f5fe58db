package comm

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/r1go/r1go/model"
)

// A collective waits for every rank, and a transport may wait forever for
// one that died (MPI does, unless its launcher kills the job). Watch runs
// beside the transport: every rank holds a TCP connection to rank 0 and
// both ends send a heartbeat each timeout/4. A connection that closes (the
// kernel closes a dead process's sockets at once) or stays silent for the
// timeout is a dead rank; rank 0 tells every other rank which one before
// reporting it, so every survivor stops within about one timeout with an
// error naming the rank.

// Watcher is a running heartbeat; Stop ends it without reporting.
type Watcher struct {
	mu      sync.Mutex
	stopped bool
	conns   []net.Conn
	ln      net.Listener
}

// Watch starts the heartbeat of c's ranks and calls onFail once, from its
// own goroutine, when a rank dies or falls silent for timeout. Every rank
// calls it at the same point (it gathers rank 0's address over c). host is
// the address the other ranks reach rank 0 at ("" for this machine's name,
// or MASTER_ADDR when set).
func Watch(c model.Comm, timeout time.Duration, onFail func(error)) (*Watcher, error) {
	w := &Watcher{}
	var fail sync.Once
	report := func(err error) {
		w.mu.Lock()
		stopped := w.stopped
		w.mu.Unlock()
		if !stopped {
			fail.Do(func() { onFail(err) })
		}
	}
	var addr string
	if c.Rank() == 0 {
		ln, err := net.Listen("tcp", ":0")
		if err != nil {
			return nil, fmt.Errorf("comm: heartbeat: %w", err)
		}
		w.ln = ln
		host := os.Getenv("MASTER_ADDR")
		if host == "" {
			if host, err = os.Hostname(); err != nil {
				host = "127.0.0.1"
			}
		}
		addr = net.JoinHostPort(host, strconv.Itoa(ln.Addr().(*net.TCPAddr).Port))
	}
	parts, err := GatherVar(c, []byte(addr))
	if err != nil {
		return nil, err
	}
	addr = string(parts[0])
	if c.Rank() == 0 {
		accepted := make(chan error, 1)
		go func() {
			for k := 1; k < c.Size(); k++ {
				conn, err := w.ln.Accept()
				if err != nil {
					accepted <- err
					return
				}
				w.mu.Lock()
				w.conns = append(w.conns, conn)
				w.mu.Unlock()
				go w.hubRead(conn, timeout, report)
			}
			accepted <- nil
		}()
		select {
		case err := <-accepted:
			if err != nil {
				return nil, fmt.Errorf("comm: heartbeat: %w", err)
			}
		case <-time.After(2 * timeout):
			return nil, fmt.Errorf("comm: heartbeat: not every rank connected to %s within %s", addr, 2*timeout)
		}
	} else {
		conn, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return nil, fmt.Errorf("comm: heartbeat: rank %d cannot reach rank 0 at %s: %w", c.Rank(), addr, err)
		}
		fmt.Fprintf(conn, "rank %d\n", c.Rank())
		w.conns = []net.Conn{conn}
		go w.leafRead(conn, timeout, report)
	}
	go w.beat(timeout / 4)
	return w, nil
}

// hubRead is rank 0's view of one rank: its name line, then heartbeats.
func (w *Watcher) hubRead(conn net.Conn, timeout time.Duration, report func(error)) {
	rd := bufio.NewReader(conn)
	rank := "?"
	for {
		line, err := readBeat(conn, rd, timeout)
		if err != nil {
			why := fmt.Errorf("rank %s died (its heartbeat connection closed: %v)", rank, err)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				why = fmt.Errorf("rank %s sent no heartbeat for %s", rank, timeout*3/2)
			}
			if w.isStopped() {
				return
			}
			w.broadcast("dead " + rank)
			report(why)
			return
		}
		switch line = strings.TrimSpace(line); {
		case strings.HasPrefix(line, "rank "):
			rank = strings.TrimPrefix(line, "rank ")
		case line == "bye":
			return
		}
	}
}

// leafRead is a rank's view of rank 0: heartbeats, or news of a death.
func (w *Watcher) leafRead(conn net.Conn, timeout time.Duration, report func(error)) {
	rd := bufio.NewReader(conn)
	for {
		line, err := readBeat(conn, rd, timeout)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				report(fmt.Errorf("rank 0 sent no heartbeat for %s", timeout*3/2))
			} else {
				report(fmt.Errorf("rank 0 died (its heartbeat connection closed: %v)", err))
			}
			return
		}
		switch line = strings.TrimSpace(line); {
		case strings.HasPrefix(line, "dead "):
			report(fmt.Errorf("rank %s died (rank 0 lost its heartbeat)", strings.TrimPrefix(line, "dead ")))
			return
		case line == "bye":
			return
		}
	}
}

// readBeat reads the next line, allowing timeout and then half as much
// again: when this process itself was not scheduled for a while (an
// overloaded machine, a stop-the-world pause), the deadline passes with
// the peer's heartbeats already waiting in the socket, and the second
// read finds them. A closed connection is reported at once.
func readBeat(conn net.Conn, rd *bufio.Reader, timeout time.Duration) (string, error) {
	conn.SetReadDeadline(time.Now().Add(timeout))
	line, err := rd.ReadString('\n')
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		conn.SetReadDeadline(time.Now().Add(timeout / 2))
		var more string
		more, err = rd.ReadString('\n')
		line += more
	}
	return line, err
}

func (w *Watcher) beat(every time.Duration) {
	for !w.isStopped() {
		w.broadcast("h")
		time.Sleep(every)
	}
}

func (w *Watcher) broadcast(msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.conns {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		fmt.Fprintln(c, msg)
	}
}

func (w *Watcher) isStopped() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopped
}

// Stop says goodbye to the peers and closes the connections; a peer that
// ends after Stop is no failure.
func (w *Watcher) Stop() {
	if w == nil {
		return
	}
	w.broadcast("bye")
	w.mu.Lock()
	w.stopped = true
	for _, c := range w.conns {
		c.Close()
	}
	if w.ln != nil {
		w.ln.Close()
	}
	w.mu.Unlock()
}
