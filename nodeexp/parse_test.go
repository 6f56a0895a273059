package nodeexp

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
)

// minimal is the smallest exposition Parse accepts, in node_exporter's
// layout: the families it needs and nothing else.
const minimal = `# HELP node_cpu_seconds_total Seconds the CPUs spent in each mode.
# TYPE node_cpu_seconds_total counter
node_cpu_seconds_total{cpu="0",mode="idle"} 100
node_cpu_seconds_total{cpu="0",mode="iowait"} 10
node_cpu_seconds_total{cpu="0",mode="user"} 50
node_cpu_seconds_total{cpu="0",mode="system"} 20
node_cpu_seconds_total{cpu="1",mode="idle"} 120
node_cpu_seconds_total{cpu="1",mode="user"} 30
# TYPE node_memory_MemTotal_bytes gauge
node_memory_MemTotal_bytes 8e+09
# TYPE node_memory_MemAvailable_bytes gauge
node_memory_MemAvailable_bytes 6e+09
# TYPE node_procs_running gauge
node_procs_running 4
# TYPE node_boot_time_seconds gauge
node_boot_time_seconds 1.7e+09
# TYPE node_disk_io_time_seconds_total counter
node_disk_io_time_seconds_total{device="sda"} 40
node_disk_io_time_seconds_total{device="loop0"} 0
# TYPE node_filesystem_size_bytes gauge
node_filesystem_size_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 1e+11
# TYPE node_filesystem_free_bytes gauge
node_filesystem_free_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 8e+10
# TYPE node_filesystem_avail_bytes gauge
node_filesystem_avail_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 7.5e+10
`

func TestParseMinimal(t *testing.T) {
	s, err := Parse(strings.NewReader(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.CPU) != 2 || s.CPU["0"]["user"] != 50 || s.CPU["1"]["idle"] != 120 || s.MemTotal != 8e9 || s.MemAvailable != 6e9 ||
		s.ProcsRunning != 4 || s.BootTime != 1.7e9 || s.DiskIOTime["sda"] != 40 || len(s.DiskIOTime) != 2 ||
		s.Filesystems["/"] != (Filesystem{Size: 1e11, Free: 8e10, Avail: 7.5e10}) || s.Load != nil || s.Pressure != nil {
		t.Errorf("snapshot %+v", s)
	}
}

// A real exposition: node_exporter 1.5.0 (Debian 12) with the recommended
// collectors, scraped on a 2-CPU VM.
func TestParseNodeExporter15(t *testing.T) {
	f, err := os.Open("testdata/recommended-1.5.prom")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.CPU) != 2 || s.CPU["0"]["user"] != 7428.2 || s.CPU["1"]["steal"] != 14.5 || s.MemTotal == 0 ||
		s.ProcsRunning != 2 || s.BootTime != 1.796162531e9 || s.DiskIOTime["vda"] != 36.68 ||
		s.Filesystems["/"].Size != 2.70553174016e11 || s.Load == nil || s.Load[0] != 1.26 || s.Load[2] != 1.82 ||
		s.Pressure["cpu"] != 5460.414607 || s.Pressure["memory"] != 0 || len(s.Pressure) != 3 {
		t.Errorf("snapshot %+v", s)
	}
}

// Hostile or broken expositions: a clear error, never a panic, never a
// snapshot.
func TestParseRefuses(t *testing.T) {
	replace := func(old, new string) string {
		if !strings.Contains(minimal, old) {
			t.Fatalf("fixture has no %q", old)
		}
		return strings.Replace(minimal, old, new, 1)
	}
	drop := func(prefix string) string {
		var out []string
		for _, l := range strings.Split(minimal, "\n") {
			if !strings.Contains(l, prefix) {
				out = append(out, l)
			}
		}
		return strings.Join(out, "\n")
	}
	cases := []struct {
		name, in, msg string
	}{
		{"empty", "", "empty exposition"},
		{"blank", " \n\n", "empty exposition"},
		{"huge", minimal + strings.Repeat("# padding padding padding padding\n", MaxExpositionBytes/30), "larger than 1048576 bytes"},
		{"truncated mid-line", minimal[:len(minimal)-20], "parse exposition"},
		{"truncated label", minimal + `node_load1{a="`, "parse exposition"},
		{"binary", "\x00\x01\x02\xff\xfe", "parse exposition"},
		{"JSON", `{"schema":1,"cpu":0.5}`, "parse exposition"},
		{"second TYPE", minimal + "# TYPE node_procs_running counter\n", "parse exposition"},
		{"CPU as gauge", replace("node_cpu_seconds_total counter", "node_cpu_seconds_total gauge"), "node_cpu_seconds_total is a gauge, want a counter"},
		{"memory untyped", replace("# TYPE node_memory_MemTotal_bytes gauge\n", ""), "node_memory_MemTotal_bytes is a untyped, want a gauge"},
		{"NaN", replace("node_procs_running 4", "node_procs_running NaN"), "node_procs_running = NaN"},
		{"+Inf", replace(`mode="user"} 50`, `mode="user"} +Inf`), `node_cpu_seconds_total{cpu="0",mode="user"} = +Inf`},
		{"negative", replace(`{device="sda"} 40`, `{device="sda"} -1`), `node_disk_io_time_seconds_total{device="sda"} = -1`},
		{"not a number", replace("node_procs_running 4", "node_procs_running four"), "parse exposition"},
		{"duplicate CPU series", replace(`{cpu="1",mode="user"} 30`, `{cpu="1",mode="user"} 30`+"\n"+`node_cpu_seconds_total{cpu="1",mode="user"} 31`), `two series with cpu="1", mode="user"`},
		{"duplicate device", replace(`{device="loop0"} 0`, `{device="sda"} 0`), `two series with device="sda"`},
		{"duplicate gauge", replace("node_procs_running 4", "node_procs_running 4\nnode_procs_running{x=\"1\"} 5"), "node_procs_running has 2 series, want 1"},
		{"duplicate filesystem", replace(`node_filesystem_free_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 8e+10`,
			`node_filesystem_free_bytes{device="/dev/sda1",fstype="ext4",mountpoint="/"} 8e+10`+"\n"+`node_filesystem_free_bytes{device="/dev/sda1",fstype="xfs",mountpoint="/"} 8e+10`),
			`two series with mountpoint="/", device="/dev/sda1"`},
		{"no mode label", replace(`{cpu="1",mode="user"}`, `{cpu="1"}`), `{cpu="1"}: want cpu and mode labels`},
		{"no device label", replace(`{device="loop0"}`, `{disk="loop0"}`), "has no device label"},
		{"no idle", replace(`{cpu="1",mode="idle"}`, `{cpu="1",mode="nice"}`), `no idle time for cpu "1"`},
		{"memory total 0", replace("node_memory_MemTotal_bytes 8e+09", "node_memory_MemTotal_bytes 0"), "node_memory_MemTotal_bytes is 0"},
		{"no CPU", drop("node_cpu_seconds_total"), "no node_cpu_seconds_total in the exposition: enable node_exporter's cpu collector"},
		{"no meminfo", drop("MemAvailable"), "no node_memory_MemAvailable_bytes in the exposition: enable node_exporter's meminfo collector"},
		{"no stat", drop("node_boot_time_seconds"), "enable node_exporter's stat collector"},
		{"no diskstats", drop("node_disk_io_time"), "enable node_exporter's diskstats collector"},
		{"no filesystem", drop("node_filesystem_avail"), "enable node_exporter's filesystem collector"},
		{"collector failed", drop("node_procs_running") + "# TYPE node_scrape_collector_success gauge\nnode_scrape_collector_success{collector=\"stat\"} 0\n",
			"node_exporter's stat collector failed on the server"},
		{"partial load averages", minimal + "# TYPE node_load1 gauge\nnode_load1 0.5\n", "1 of node_load1, node_load5 and node_load15 present"},
		{"pressure as gauge", minimal + "# TYPE node_pressure_cpu_waiting_seconds_total gauge\nnode_pressure_cpu_waiting_seconds_total 1\n", "is a gauge, want a counter"},
		{"many labels clipped", replace(`{device="sda"} 40`, `{a="1",b="2",c="3",d="4",e="5",f="6",device="sda"} -1`), `{a="1",b="2",c="3",d="4",…} = -1`},
		{"long label value clipped", replace(`{device="loop0"} 0`, `{device="`+strings.Repeat("x", 5000)+`"} -1`), `"xxxxxxxx`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse(strings.NewReader(tc.in))
			if err == nil {
				t.Fatalf("accepted: %+v", s)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			if len(err.Error()) > 400 {
				t.Errorf("error is %d bytes long: hostile values must not reach the log whole", len(err.Error()))
			}
		})
	}
}

// A reader that fails mid-way: the read error, not a parse of the part.
func TestParseReadError(t *testing.T) {
	r := io.MultiReader(strings.NewReader(minimal[:100]), failingReader{})
	if _, err := Parse(r); !errors.Is(err, errBroken) {
		t.Fatalf("error %v, want the read error", err)
	}
}

var errBroken = errors.New("connection reset")

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errBroken }

// Two devices mounted at one mount point both count.
func TestParseOvermount(t *testing.T) {
	in := minimal
	for _, fam := range []string{"size", "free", "avail"} {
		in += "node_filesystem_" + fam + `_bytes{device="tmpfs",fstype="tmpfs",mountpoint="/"} 10` + "\n"
	}
	s, err := Parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if s.Filesystems["/"].Size != 1e11 || s.Filesystems["/ (tmpfs)"].Size != 10 || len(s.Filesystems) != 2 {
		t.Errorf("filesystems %+v", s.Filesystems)
	}
}
