//go:build !amd64

package probe

func vectorLoops() []fmaLoop { return nil }

func dotLoop() *fmaLoop { return nil }

func vectorSum() func([]float32) float32 { return sumGo }
