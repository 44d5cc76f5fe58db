package optim

import "testing"

// TestShardLayoutPartitions: the ranks' ZeRO spans cover every
// parameter exactly once, for arenas that do and do not divide evenly.
func TestShardLayoutPartitions(t *testing.T) {
	for _, c := range []struct{ n, b, size int }{{10, 3, 2}, {17, 4, 3}, {5, 8, 4}, {3, 1, 4}, {64, 8, 2}} {
		seen := make([]int, c.n)
		for r := 0; r < c.size; r++ {
			spans, own := ShardLayout{N: c.n, Bucket: c.b, Ranks: c.size}.Spans(r)
			k, end := 0, 0
			for _, s := range spans {
				if s.Off < end || s.N < 1 {
					t.Fatalf("%+v rank %d: spans out of order or empty: %v", c, r, spans)
				}
				end = s.Off + s.N
				k += s.N
				for i := s.Off; i < s.Off+s.N; i++ {
					seen[i]++
				}
			}
			if k != own {
				t.Fatalf("%+v rank %d: spans hold %d, own %d", c, r, k, own)
			}
		}
		for i, v := range seen {
			if v != 1 {
				t.Fatalf("%+v: parameter %d owned %d times", c, i, v)
			}
		}
	}
}

// TestShardLayoutPadding: rank 0 owns the most, and the last bucket is
// padded only when its length does not divide by the ranks.
func TestShardLayoutPadding(t *testing.T) {
	for _, c := range []struct{ n, b, ranks, bucket, own0, padded int }{
		{10, 3, 2, 3, 5, 0}, {17, 4, 3, 4, 6, 6}, {5, 8, 4, 2, 2, 8}, {3, 1, 4, 1, 1, 4}, {64, 100, 2, 32, 32, 0},
	} {
		l := NewShardLayout(c.n, c.b, c.ranks)
		_, own := l.Spans(0)
		if l.Bucket != c.bucket || own != c.own0 || l.Padded() != c.padded {
			t.Errorf("NewShardLayout(%d, %d, %d): bucket %d, rank 0 owns %d, padded %d; want %d, %d, %d",
				c.n, c.b, c.ranks, l.Bucket, own, l.Padded(), c.bucket, c.own0, c.padded)
		}
		for r := 1; r < c.ranks; r++ {
			if _, o := l.Spans(r); o > own {
				t.Errorf("%+v: rank %d owns %d, more than rank 0's %d", c, r, o, own)
			}
		}
	}
}
