package agent

import (
	"maps"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/procfs/blockdevice"
)

// Lines as kernels write them: 14 values (up to 4.17), 18 (4.18, discard),
// 20 (5.5, flush), and one too short; IOsTotalTicks, the 13th value,
// differs from the values around it on every line.
const diskstatsSample = `   8       0 sda 10 0 80 5 20 0 160 7 0 1234 12 
   8       1 sda1 10 0 80 5 20 0 160 7 0 1200 12 0 0 0 0
 259       0 nvme0n1 1 2 3 4 5 6 7 8 9 777 11 12 13 14 15 16 17
   7       0 loop0 1 2 3 4 5 6 7 8 9 55 11 12 13 14 15 16 17
   1       0 ram0 1 2 3 4 5 6 7 8 9 66 11
 252       0 zram0 1 2 3 4 5 6 7 8 9 88 11
   8      16 sdb 1 2 3
`

func TestDiskIOTicks(t *testing.T) {
	for _, tc := range []struct {
		name string
		data string
		only map[string]bool
		want map[string]uint64
	}{
		{"every disk", diskstatsSample, nil, map[string]uint64{"sda": 1234, "sda1": 1200, "nvme0n1": 777}},
		{"named, a loop device too", diskstatsSample, map[string]bool{"loop0": true, "sda1": true, "sdc": true}, map[string]uint64{"loop0": 55, "sda1": 1200}},
		{"short line skipped even when named", diskstatsSample, map[string]bool{"sdb": true}, map[string]uint64{}},
		{"empty file", "", nil, map[string]uint64{}},
		{"no final newline", "8 0 sda 1 2 3 4 5 6 7 8 9 42 11", nil, map[string]uint64{"sda": 42}},
		{"bad value of a device not counted", "7 0 loop0 1 2 3 4 5 6 7 8 9 x 11\n8 0 sda 1 2 3 4 5 6 7 8 9 42 11\n", nil, map[string]uint64{"sda": 42}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := diskIOTicks([]byte(tc.data), tc.only)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
	for _, bad := range []string{
		"8 0 sda 1 2 3 4 5 6 7 8 9 x 11\n",
		"8 0 sda 1 2 3 4 5 6 7 8 9 -1 11\n",
		"8 0 sda 1 2 3 4 5 6 7 8 9 18446744073709551616 11\n",
	} {
		if got, err := diskIOTicks([]byte(bad), nil); err == nil || !strings.Contains(err.Error(), `device "sda"`) {
			t.Errorf("%q: got %v, %v; want an error naming sda", bad, got, err)
		}
	}
}

// The counted devices' ticks are those procfs's own parser reads, on this
// machine's /proc/diskstats and on the test fixtures.
func TestDiskIOTicksAsProcfs(t *testing.T) {
	for _, root := range []string{"/proc", "testdata/t0/proc", "testdata/t1/proc"} {
		data, err := os.ReadFile(root + "/diskstats")
		if err != nil {
			t.Fatal(err)
		}
		fs, err := blockdevice.NewFS(root, root)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := fs.ProcDiskstats()
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]uint64{}
		for _, d := range ds {
			if countedDevice(d.DeviceName, nil) {
				want[d.DeviceName] = d.IOsTotalTicks
			}
		}
		got, err := diskIOTicks(data, nil)
		if err != nil {
			t.Fatal(err)
		}
		// /proc moves between the two reads; equal names, and values
		// equal for the fixtures.
		if root != "/proc" && !maps.Equal(got, want) || len(got) != len(want) {
			t.Errorf("%s: got %v, procfs %v", root, got, want)
		}
	}
}
