package cuda

import (
	"errors"
	"os"
	"strings"
	"testing"
)

// TestNoDriver: a machine without libcuda gets ErrNoDriver, and the error
// names what was tried.
func TestNoDriver(t *testing.T) {
	_, err := openDriver([]string{"/nonexistent/libcuda.so.1"})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("error %v is not ErrNoDriver", err)
	}
	if errors.Is(err, ErrNoDevice) || !strings.Contains(err.Error(), "/nonexistent/libcuda.so.1") {
		t.Fatalf("error %q should name the library tried, and only ErrNoDriver", err)
	}
}

// TestNoDevice runs the real driver library of a machine without a GPU:
// Debian's libcuda1 unpacked on a CPU-only box (R1GO_TEST_LIBCUDA names
// its libcuda.so.1). cuInit then fails with CUDA_ERROR_NO_DEVICE, which
// must come back as ErrNoDevice, not ErrNoDriver.
func TestNoDevice(t *testing.T) {
	lib := os.Getenv("R1GO_TEST_LIBCUDA")
	if lib == "" {
		t.Skip("R1GO_TEST_LIBCUDA is not set: no GPU-less driver library to test ErrNoDevice with (see the package doc)")
	}
	_, err := openDriver([]string{lib})
	if err == nil {
		t.Skip("the driver found a GPU; ErrNoDevice cannot be provoked here")
	}
	if !errors.Is(err, ErrNoDevice) || errors.Is(err, ErrNoDriver) {
		t.Fatalf("error %v, want ErrNoDevice", err)
	}
	t.Logf("%v", err)
}

// TestOpen: on a GPU machine Open works; elsewhere it fails with exactly
// one of the two typed errors, so commands can fall back to the CPU.
func TestOpen(t *testing.T) {
	d, err := Open()
	if err != nil {
		if !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
			t.Fatalf("Open failed with %v, neither ErrNoDriver nor ErrNoDevice", err)
		}
		t.Skipf("no GPU: %v", err)
	}
	defer d.Close()
	t.Logf("opened %s", d.Name())
}

func TestNoNVRTC(t *testing.T) {
	_, err := openNVRTC([]string{"/nonexistent/libnvrtc.so.12"})
	if !errors.Is(err, ErrNoNVRTC) {
		t.Fatalf("error %v is not ErrNoNVRTC", err)
	}
}

func TestErrorText(t *testing.T) {
	e := &Error{Call: "cuMemAlloc_v2", Code: 2, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"}
	if got, want := e.Error(), "cuda: cuMemAlloc_v2 failed: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"; got != want {
		t.Fatalf("%q, want %q", got, want)
	}
}

func TestArchFor(t *testing.T) {
	for _, c := range []struct {
		major, minor int
		want         string
	}{{9, 0, "sm_90a"}, {8, 0, "sm_80"}, {8, 9, "sm_89"}, {10, 0, "sm_100"}} {
		if got := archFor(c.major, c.minor); got != c.want {
			t.Errorf("archFor(%d, %d) = %s, want %s", c.major, c.minor, got, c.want)
		}
	}
}

// TestSearchNames: the environment variable's path comes first, then the
// sonames for the loader, then copies found in toolkit and wheel folders.
func TestSearchNames(t *testing.T) {
	dir := t.TempDir()
	wheel := dir + "/lib/python3.11/site-packages/nvidia/cublas/lib"
	if err := os.MkdirAll(wheel, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wheel+"/libcublas.so.12", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("VIRTUAL_ENV", dir)
	t.Setenv("R1GO_TEST_LIB", "/opt/custom/libcublas.so.13")
	got := searchNames("R1GO_TEST_LIB", "libcublas.so.13", "libcublas.so.12")
	if len(got) < 4 || got[0] != "/opt/custom/libcublas.so.13" || got[1] != "libcublas.so.13" || got[2] != "libcublas.so.12" {
		t.Fatalf("search order %v", got)
	}
	if last := got[len(got)-1]; last != wheel+"/libcublas.so.12" {
		t.Fatalf("the wheel's library is not searched last: %v", got)
	}
}

// TestSelect: "cpu" is the CPU; on a machine without a GPU "auto" falls
// back to the CPU and says why, and "cuda" is an error; an unknown name is
// an error that lists the choices.
func TestSelect(t *testing.T) {
	d, note, err := Select("cpu")
	if err != nil || !strings.HasPrefix(d.Name(), "cpu") || !strings.Contains(note, "cpu") {
		t.Fatalf("cpu: %v %q %v", d, note, err)
	}
	if _, _, err := Select("tpu"); err == nil || !strings.Contains(err.Error(), "auto, cuda or cpu") {
		t.Fatalf("unknown device: %v", err)
	}
	_, openErr := Open()
	d, note, err = Select("auto")
	switch {
	case openErr == nil:
		if err != nil || !strings.HasPrefix(d.Name(), "cuda(") {
			t.Fatalf("auto on a GPU machine: %v %v", d, err)
		}
	case errors.Is(openErr, ErrNoDriver) || errors.Is(openErr, ErrNoDevice):
		if err != nil || !strings.HasPrefix(d.Name(), "cpu") || !strings.Contains(note, "no GPU") {
			t.Fatalf("auto without a GPU: %v %q %v", d, note, err)
		}
		if _, _, err := Select("cuda"); !errors.Is(err, ErrNoDriver) && !errors.Is(err, ErrNoDevice) {
			t.Fatalf("cuda without a GPU: error %v", err)
		}
	}
}
