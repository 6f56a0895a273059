package agent

import "time"

// SchemaVersion is the version of the /v1/load reply this package writes and
// accepts. A reply with another version is refused by DecodeReport.
const SchemaVersion = 1

// DefaultPort is the TCP port lvs-agent listens on unless told otherwise.
const DefaultPort = 9771

// MaxReportBytes bounds a /v1/load reply. Larger replies are refused.
const MaxReportBytes = 16 << 10

// MaxLoad is the largest normalised load an agent reports and DecodeReport
// accepts. The agent caps its loads here (a host with 100 times more runnable
// tasks than CPUs is simply "overloaded"); a reply above it is refused as
// nonsense.
const MaxLoad = 100

// Report is the body of GET /v1/load.
//
// The four normalised loads use one scale: 0 = idle, 1 = fully loaded, and
// values above 1 mean overloaded (for example more runnable tasks than CPUs).
type Report struct {
	Schema int       `json:"schema"`
	Time   time.Time `json:"time"`   // when the sample was taken (agent's clock)
	Source string    `json:"source"` // "host", "cgroup:/path", "process:PID"

	CPU       float64 `json:"cpu"`
	Memory    float64 `json:"memory"`
	Disk      float64 `json:"disk"`
	Processes float64 `json:"processes"`

	// CPUTime lets a poller compute the CPU busy fraction over its own
	// interval instead of the agent's last window: the difference of two
	// replies' counters. Absent from agents older than this field.
	CPUTime *CPUTime `json:"cpu_time,omitempty"`

	Raw Raw `json:"raw"`
}

// CPUTime holds the agent's running totals since Since (when its sampler
// started): SampledSeconds of sampled wall time, and BusySeconds, the
// integral of the CPU busy fraction over it (the sum of CPU × window over
// every window). Between two replies with the same Since, ΔBusy ÷ ΔSampled
// is the mean busy fraction over the time between them.
type CPUTime struct {
	Since          time.Time `json:"since"`
	BusySeconds    float64   `json:"busy_seconds"`
	SampledSeconds float64   `json:"sampled_seconds"`
}

// Add folds one sampled window of seconds at CPU busy fraction cpu into
// the totals.
func (c *CPUTime) Add(cpu, seconds float64) {
	c.BusySeconds += cpu * seconds
	c.SampledSeconds += seconds
}

// BusyBetween returns the mean CPU busy fraction between two replies'
// totals, prev the earlier. ok is false when they cannot be compared: one
// is missing, the agent restarted between them (Since differs), or no
// window was sampled in between (the same sample twice).
func BusyBetween(prev, cur *CPUTime) (busy float64, ok bool) {
	if prev == nil || cur == nil || !prev.Since.Equal(cur.Since) {
		return 0, false
	}
	ds := cur.SampledSeconds - prev.SampledSeconds
	db := cur.BusySeconds - prev.BusySeconds
	if !(ds > 0) || db < 0 {
		return 0, false
	}
	return min(db/ds, MaxLoad), true
}

// Raw holds the figures behind the normalised loads, for operators and
// `lvsctl explain`. Fields that do not apply to a source are zero or absent.
type Raw struct {
	PID               int                `json:"pid,omitempty"`             // process:/pidfile: sources: the PID sampled
	WindowSeconds     float64            `json:"window_seconds"`            // CPU sampling window
	CPUs              float64            `json:"cpus"`                      // CPUs available to the source (cgroup: quota/cpuset)
	CPUBusy           float64            `json:"cpu_busy"`                  // busy fraction over the window
	MemTotalBytes     uint64             `json:"mem_total_bytes"`           // host MemTotal, or the cgroup's memory limit
	MemAvailableBytes uint64             `json:"mem_available_bytes"`       // host MemAvailable, or limit − working set
	DiskSpaceUsed     map[string]float64 `json:"disk_space_used,omitempty"` // mount point -> used fraction
	DiskIOBusy        float64            `json:"disk_io_busy"`              // busiest device's busy fraction
	DiskIODevice      string             `json:"disk_io_device,omitempty"`  // the busiest device
	RunnableTasks     int                `json:"runnable_tasks"`
	Load1             float64            `json:"load1"`
	Load5             float64            `json:"load5"`
	Load15            float64            `json:"load15"`
	PSICPUSome10      *float64           `json:"psi_cpu_some10,omitempty"`    // % of time, where the kernel has PSI
	PSIMemorySome10   *float64           `json:"psi_memory_some10,omitempty"` // % of time
	PSIIOSome10       *float64           `json:"psi_io_some10,omitempty"`     // % of time
}
