package probe

import (
	"time"

	"golang.org/x/sys/unix"
)

// threadCPUTime is the CPU time the calling OS thread has used; 0 if the
// clock cannot be read.
func threadCPUTime() time.Duration {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts) != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// ProcessCPUTime is the CPU time (user + system) all threads of this
// process have used, including threads of libraries loaded at run time.
// ok is false where it cannot be read.
func ProcessCPUTime() (d time.Duration, ok bool) {
	var ts unix.Timespec
	if unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts) != nil {
		return 0, false
	}
	return time.Duration(ts.Nano()), true
}
