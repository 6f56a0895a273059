// Package history owns the cycle history files: one record per managed
// server per cycle, in the state directory, in a compact binary format,
// bounded and rotated by rename (history.bin → history.bin.1 → …).
// lvs-monitor writes them (Writer); lvsctl history and any other tool
// read them (Read), and the JSON-lines files of the older format
// (history.jsonl…) too. It imports the standard library and
// internal/statedir (the writer opens its files there, never through a
// link) only, so that lvsctl stays lean; docs/history.md describes the
// format and every field.
package history

import "time"

// SchemaVersion is the version of Record's fields, the "v" of every
// record (and of every line of the older JSON-lines files). A reader
// skips lines of another version (with a note): fields are only ever
// added within a version; a renamed or retyped field is a new version.
const SchemaVersion = 1

// FileName is the current history file in the state directory; the
// rotated ones are FileName.1 (the newest) to FileName.N.
const FileName = "history.bin"

// JSONFileName is the current file of the older JSON-lines format (one
// JSON object per line), which readers still read and the writer no
// longer writes; its rotated files are JSONFileName.1 to JSONFileName.N.
const JSONFileName = "history.jsonl"

// DefaultDir is lvs-monitor's default state_dir, where lvsctl history
// looks when the configuration names none.
const DefaultDir = "/var/lib/lvs-monitor"

// Record is one managed server in one cycle: what the director saw, what
// the agent said, what the controller computed, and what was written.
// A figure that does not exist that cycle (no earlier counter reading, no
// probe answer, no agent reply, no load, no controller step) is left out,
// never a made-up zero; so are false flags and empty texts. Numbers are
// always written.
type Record struct {
	V int `json:"v"` // SchemaVersion
	// Time is the cycle's start; every record of a cycle has the same.
	Time    time.Time `json:"time"`
	Service string    `json:"service"` // VIP:PORT/PROTO or fwmark:N, as in the configuration
	Server  string    `json:"server"`  // RIP:PORT

	// Ownership after the cycle: "managed", "drained" or "down".
	State         string `json:"state"`
	Configured    int    `json:"configured"`      // the configured default weight
	DefaultWeight int    `json:"default_weight"`  // the default weight that stands (an operator's, else configured)
	WeightBefore  int    `json:"weight_before"`   // the kernel's weight as read
	WeightTo      int    `json:"weight_to"`       // the weight decided (weight_before when no write was due)
	WeightAfter   int    `json:"weight_after"`    // the kernel's weight after the cycle's write
	Write         bool   `json:"write,omitempty"` // a write was due
	Wrote         bool   `json:"wrote,omitempty"` // and was made
	WriteError    string `json:"write_error,omitempty"`
	Reason        string `json:"reason,omitempty"` // why the weight or ownership changed

	// Director side.
	Counter       uint32   `json:"counter"`             // the kernel's connection counter as read
	NewConns      *int64   `json:"new_conns,omitempty"` // connections scheduled since the last cycle; absent: unknown
	ActiveConns   int      `json:"active_conns"`        // as read
	InactiveConns int      `json:"inactive_conns"`
	ActiveDelta   int      `json:"active_delta"`            // growth of active_conns since the last cycle
	ProbeSeconds  *float64 `json:"probe_seconds,omitempty"` // probe time; absent: not probed or failed
	ProbeError    string   `json:"probe_error,omitempty"`
	ProbeTimedOut bool     `json:"probe_timed_out,omitempty"`
	Fails         int      `json:"fails"`  // failed probes in a row, this one included
	Passes        int      `json:"passes"` // answered probes in a row

	// Agent side.
	Polled       bool    `json:"polled,omitempty"` // the agent was polled
	AgentError   string  `json:"agent_error,omitempty"`
	AgentStale   bool    `json:"agent_stale,omitempty"` // silent longer than agent_expiry
	AgentSeconds float64 `json:"agent_seconds"`
	Agent        *Agent  `json:"agent,omitempty"` // absent: no good reply this cycle

	// The controller's figures (the decision's trace).
	Inputs       *Inputs   `json:"inputs,omitempty"`        // the inputs of load; absent with it
	Load         *float64  `json:"load,omitempty"`          // aggregate load; absent: not computed
	DirectorOnly bool      `json:"director_only,omitempty"` // load from input and response alone (agent stale)
	Ramp         float64   `json:"ramp"`                    // slow-start factor, 1 when not ramping
	Frozen       bool      `json:"frozen,omitempty"`        // the service was frozen (fail static)
	CtrlBefore   *float64  `json:"ctrl_before,omitempty"`   // the controller's fractional weight before the cycle
	CtrlAfter    *float64  `json:"ctrl_after,omitempty"`
	Capacity     *Capacity `json:"capacity,omitempty"` // the capacity controller's step, when it decided
	Formula      *Formula  `json:"formula,omitempty"`  // the LVS formula's step, when it ran
	Compare      *Compare  `json:"compare,omitempty"`  // the write rule's test, when there was a candidate
	Guard        *Guard    `json:"guard,omitempty"`    // the backlog guard's part, when it held or acted
}

// Agent is the agent's reply as received: the four normalised loads, the
// CPU the controller used (averaged over the director's interval when the
// agent sends its totals), and the raw figures behind the loads.
type Agent struct {
	Source    string    `json:"source,omitempty"` // "host", "cgroup:/path", "process:PID"
	Time      time.Time `json:"time"`             // the sample's time, the agent's clock
	CPU       float64   `json:"cpu"`              // the agent's last window
	Memory    float64   `json:"memory"`
	Disk      float64   `json:"disk"`
	Processes float64   `json:"processes"`
	// CPUUsed is the CPU busy fraction the controller used, CPUSpan the
	// seconds of sampling it averages (0: the agent's last window).
	CPUUsed float64 `json:"cpu_used"`
	CPUSpan float64 `json:"cpu_span"`
	// Raw is the reply's "raw" object as the agent sent it (docs/agent.md).
	Raw AgentRaw `json:"raw"`
}

// AgentRaw is the "raw" object of the agent's reply (agent.Raw, whose
// JSON form it shares field for field: a test in package monitor holds
// the two together), copied rather than imported so that this package
// (and lvsctl) does not link the agent.
type AgentRaw struct {
	PID               int                `json:"pid,omitempty"`
	WindowSeconds     float64            `json:"window_seconds"`
	CPUs              float64            `json:"cpus"`
	CPUBusy           float64            `json:"cpu_busy"`
	MemTotalBytes     uint64             `json:"mem_total_bytes"`
	MemAvailableBytes uint64             `json:"mem_available_bytes"`
	DiskSpaceUsed     map[string]float64 `json:"disk_space_used,omitempty"`
	DiskIOBusy        float64            `json:"disk_io_busy"`
	DiskIODevice      string             `json:"disk_io_device,omitempty"`
	RunnableTasks     int                `json:"runnable_tasks"`
	Load1             float64            `json:"load1"`
	Load5             float64            `json:"load5"`
	Load15            float64            `json:"load15"`
	PSICPUSome10      *float64           `json:"psi_cpu_some10,omitempty"`
	PSIMemorySome10   *float64           `json:"psi_memory_some10,omitempty"`
	PSIIOSome10       *float64           `json:"psi_io_some10,omitempty"`
}

// Inputs are the six normalised inputs of the aggregate load.
type Inputs struct {
	Input    float64 `json:"input"`
	CPU      float64 `json:"cpu"`
	Memory   float64 `json:"memory"`
	Disk     float64 `json:"disk"`
	Response float64 `json:"response"`
	Process  float64 `json:"process"`
}

// Capacity is the capacity controller's step.
type Capacity struct {
	Weight         int      `json:"weight"`                    // its weight for the server; 0: no estimate yet
	Factor         *float64 `json:"factor,omitempty"`          // capacity per unit of default weight ÷ the service's median
	SaturatedAlone bool     `json:"saturated_alone,omitempty"` // busy at saturation while the median is not, and a significant loss
	BacklogCut     bool     `json:"backlog_cut,omitempty"`     // held cut by the backlog guard with a factor below the anchor: moved at once
	CPU            float64  `json:"cpu"`                       // the CPU busy fraction
	// Busy is the busy fraction the estimate used, that of Bottleneck
	// ("cpu", "disk", "memory"); both absent in records written before
	// the estimate used more than the CPU, whose estimate used CPU.
	Busy       float64 `json:"busy,omitempty"`
	Bottleneck string  `json:"bottleneck,omitempty"`
	// Reading is what the connections served were divided by when the
	// coefficients moved it from Busy, Driver the input that moved it
	// most; both absent when it is Busy (the shipped coefficients).
	Reading  float64 `json:"reading,omitempty"`
	Driver   string  `json:"driver,omitempty"`
	Estimate float64 `json:"estimate"`        // smoothed capacity after this cycle
	Error    float64 `json:"error,omitempty"` // the estimate's relative standard error
	// Rule names the rule that held the weight: "TH1 light" (every
	// server lightly loaded: nothing decided), "TH2 close" (within the
	// anchor of the median: the default weight); absent when none did.
	Rule string `json:"rule,omitempty"`
}

// Formula is the LVS formula's step.
type Formula struct {
	Before float64  `json:"before"`
	Load   *float64 `json:"load,omitempty"`
	Step   *float64 `json:"step,omitempty"`
	Raw    *float64 `json:"raw,omitempty"`
	Min    float64  `json:"min"`
	Max    float64  `json:"max"`
	After  *float64 `json:"after,omitempty"`
	Ramp   float64  `json:"ramp"`
	Next   int      `json:"next"`
}

// Compare is the write rule's test of a candidate weight.
type Compare struct {
	Next     int    `json:"next"`
	Rule     string `json:"rule,omitempty"`
	Passes   bool   `json:"passes,omitempty"`
	Overrule string `json:"overrule,omitempty"`
}

// Guard is the backlog guard's part of a decision.
type Guard struct {
	// Event: "", "cut", "raise", "kept", "released", "dropped" or "sink".
	Event      string   `json:"event,omitempty"`
	Held       int      `json:"held"`
	From       int      `json:"from"`
	Raised     bool     `json:"raised,omitempty"`
	Ratio      *float64 `json:"ratio,omitempty"`
	Median     *float64 `json:"median,omitempty"`
	Active     int      `json:"active"`
	Restore    int      `json:"restore"`
	Controller int      `json:"controller"`
}
