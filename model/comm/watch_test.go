package comm

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/r1go/r1go/model"
)

// memComm is an in-process group of ranks with only the host control
// plane, for the heartbeat's address exchange.
type memComm struct {
	rank, size int
	g          *memGroup
}

type memGroup struct {
	mu    sync.Mutex
	cond  *sync.Cond
	parts [][]byte
	n     int
	round int
	out   []byte // the last completed round's result
}

func (c memComm) GatherBytes(src []byte) ([]byte, error) {
	g := c.g
	g.mu.Lock()
	defer g.mu.Unlock()
	round := g.round
	g.parts[c.rank] = append([]byte(nil), src...)
	g.n++
	if g.n == c.size {
		// The next round cannot complete before every rank has read this one.
		g.out = nil
		for _, p := range g.parts {
			g.out = append(g.out, p...)
		}
		g.n, g.round = 0, g.round+1
		g.cond.Broadcast()
	}
	for g.round == round {
		g.cond.Wait()
	}
	return g.out, nil
}
func (c memComm) Rank() int                           { return c.rank }
func (c memComm) Size() int                           { return c.size }
func (memComm) AllReduce(model.Buffer) error          { return nil }
func (memComm) ReduceScatter(_, _ model.Buffer) error { return nil }
func (memComm) AllGather(_, _ model.Buffer) error     { return nil }
func (memComm) Broadcast(model.Buffer, int) error     { return nil }
func (memComm) Barrier() error                        { return nil }
func (memComm) Close() error                          { return nil }

// TestWatchNamesTheDeadRank: three ranks; rank 2's connection drops
// without a goodbye, and ranks 0 and 1 both hear that rank 2 died, while a
// clean Stop is no failure.
func TestWatchNamesTheDeadRank(t *testing.T) {
	t.Setenv("MASTER_ADDR", "127.0.0.1")
	const size = 3
	g := &memGroup{parts: make([][]byte, size)}
	g.cond = sync.NewCond(&g.mu)
	ws := make([]*Watcher, size)
	fails := make(chan string, size)
	var wg sync.WaitGroup
	for r := 0; r < size; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := Watch(memComm{r, size, g}, 2*time.Second, func(err error) { fails <- err.Error() })
			if err != nil {
				t.Error(err)
			}
			ws[r] = w
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	time.Sleep(300 * time.Millisecond)
	select {
	case f := <-fails:
		t.Fatalf("a failure before any rank died: %s", f)
	default:
	}
	// Rank 2 dies: its sockets close with no goodbye.
	ws[2].mu.Lock()
	ws[2].stopped = true
	for _, c := range ws[2].conns {
		c.Close()
	}
	ws[2].mu.Unlock()
	for i := 0; i < 2; i++ {
		select {
		case f := <-fails:
			if !strings.Contains(f, "rank 2 died") {
				t.Errorf("failure %q does not name rank 2", f)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a surviving rank did not hear of rank 2's death within 5 s")
		}
	}
	ws[0].Stop()
	ws[1].Stop()
}
