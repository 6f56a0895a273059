//go:build linux

package ipvs

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"
)

// TestKernelErrWithoutKernel runs everywhere: the errno mapping itself, and
// nil staying nil (the write paths return kernelErr of the kernel's answer).
func TestKernelErrWithoutKernel(t *testing.T) {
	if err := kernelErr("op", nil); err != nil {
		t.Errorf("kernelErr(nil) = %v, want nil", err)
	}
	for errno, want := range map[unix.Errno]error{unix.ESRCH: ErrNotFound, unix.ENOENT: ErrNotFound, unix.EEXIST: ErrExist, unix.ERANGE: ErrWeightRange} {
		if err := kernelErr("op", errno); !errors.Is(err, want) || !errors.Is(err, errno) {
			t.Errorf("kernelErr(%v) = %v, want it to wrap %v and the errno", errno, err, want)
		}
	}
}
