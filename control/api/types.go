package api

import "time"

// ProtocolVersion is the revision of the wire format in this package,
// reported in Status.Version. 2 added Ack.LocalOnly.
const ProtocolVersion = 2

// Server states, the State field of ServerStatus. One value per server,
// the first that applies in this order.
const (
	// StatePending: no cycle has completed since lvs-monitor started.
	StatePending = "pending"
	// StateAbsent: configured, but not in the IPVS table at the last cycle
	// (the monitor skips it until it appears).
	StateAbsent = "absent"
	// StateDrained: weight 0 set by an operator (lvsctl drain or ipvsadm
	// -w 0). Never touched until undrained.
	StateDrained = "drained"
	// StateDown: the probe failed and lvs-monitor set weight 0; the
	// weight comes back when the server answers.
	StateDown = "down"
	// StateFrozen: too many servers of the service failed their probe at
	// once (fail static); no weight of the service changes.
	StateFrozen = "frozen"
	// StateUnreachable: the probe failed this cycle but the weight could
	// not be set to 0 (the write was refused); retried next cycle.
	StateUnreachable = "unreachable"
	// StateAgentStale: the agent has been silent longer than agent_expiry;
	// the load comes from the director's own inputs (INPUT, RESPONSE).
	StateAgentStale = "agent_stale"
	// StateAgentFailing: the last agent poll failed, not yet stale; the
	// weight is kept.
	StateAgentFailing = "agent_failing"
	// StateRamping: slow start after down or undrain; the server has Ramp
	// (< 1) of its computed weight.
	StateRamping = "ramping"
	// StateActive: managed, reachable, its agent answering.
	StateActive = "active"
)

// Ownership values, the Ownership field of ServerStatus and Explanation:
// the monitor's record of who owns a server's weight.
const (
	// OwnershipManaged: lvs-monitor computes and writes the weight.
	OwnershipManaged = "managed"
	// OwnershipDrained: someone other than lvs-monitor set weight 0
	// (lvsctl drain, ipvsadm -w 0); left alone until undrained.
	OwnershipDrained = "drained"
	// OwnershipDown: the probe failed and lvs-monitor set weight 0.
	OwnershipDown = "down"
)

// Status is the reply to GET /v1/status.
type Status struct {
	Version int       `json:"version"` // ProtocolVersion of the daemon
	Now     time.Time `json:"now"`     // the daemon's clock when it answered
	// Build is what the daemon's binary was built from; absent from a
	// daemon older than the field.
	Build *Build `json:"build,omitempty"`
	// Cycle is the last completed cycle; nil before the first.
	Cycle    *Cycle          `json:"cycle,omitempty"`
	Config   ConfigSummary   `json:"config"`
	Reload   ReloadStatus    `json:"reload"`
	Services []ServiceStatus `json:"services"`
	// Sync is this director's place in its synchronised group
	// (docs/director-pair.md); absent for a director that runs alone.
	Sync *SyncStatus `json:"sync,omitempty"`
}

// Build is what a binary was built from (lvs-feedback/internal/buildinfo):
// `lvsctl version` prints the daemon's beside its own.
type Build struct {
	// Version is the packaged version, the module's tag or pseudo-version,
	// or "(devel)" when the build recorded none.
	Version string `json:"version"`
	// Revision is the commit; "" when the build recorded none.
	Revision string `json:"revision,omitempty"`
	// Time is the commit's time (RFC 3339); "" when unknown.
	Time string `json:"time,omitempty"`
	// Modified: the tree had uncommitted changes.
	Modified bool `json:"modified,omitempty"`
	// GoVersion is the Go release that compiled it, e.g. "go1.26.8".
	GoVersion string `json:"go_version"`
}

// SyncStatus is a synchronised director's view of its group.
type SyncStatus struct {
	ID     string     `json:"id"`
	Role   string     `json:"role"`   // "active" or "standby", as the role source says
	Writer bool       `json:"writer"` // this director writes the weights
	Phase  string     `json:"phase"`
	Epoch  uint64     `json:"epoch"`
	Leader string     `json:"leader"` // the writer it follows or is, "id@epoch"
	Peers  []SyncPeer `json:"peers"`
	// Frames counts the sync frames received, by result: "accepted" or a
	// rejection reason.
	Frames map[string]uint64 `json:"frames,omitempty"`
	// Fleet is the etcd side of a fleet director (docs/fleet.md); absent
	// in a pair.
	Fleet *FleetStatus `json:"fleet,omitempty"`
}

// FleetStatus is a fleet director's view of etcd and its leader.
type FleetStatus struct {
	Leader      bool   `json:"leader"`    // this director leads
	LeaderID    string `json:"leader_id"` // the leader it follows or is
	EtcdUp      bool   `json:"etcd_up"`
	EtcdError   string `json:"etcd_error,omitempty"`
	LeaseOK     bool   `json:"lease_ok"`
	DocRevision int64  `json:"document_revision"`
	Directors   int    `json:"directors"`
	EtcdErrors  uint64 `json:"etcd_errors"`
	// Refused is why the last document read was refused ("" if applied).
	Refused          string `json:"refused,omitempty"`
	DocumentsRefused uint64 `json:"documents_refused"`
	CountersRefused  uint64 `json:"counters_refused"`
}

// SyncPeer is another director of the group.
type SyncPeer struct {
	Address     string     `json:"address"`
	Unreachable bool       `json:"unreachable"`
	LastOK      *time.Time `json:"last_ok,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
}

// Cycle describes one completed cycle.
type Cycle struct {
	Start           time.Time `json:"start"`
	DurationSeconds float64   `json:"duration_seconds"`
	Writes          int       `json:"writes"` // kernel weight writes
}

// ConfigSummary is the part of the running configuration that explains the
// numbers in a status.
type ConfigSummary struct {
	IntervalSeconds float64            `json:"interval_seconds"`
	Coefficients    map[string]float64 `json:"coefficients"` // input, cpu, memory, disk, response, process
	// Controller is weight.controller; ControllerSettings are the [weight]
	// keys it reads, with their values, in the order of
	// docs/configuration.md.
	Controller         string       `json:"controller"`
	ControllerSettings []Setting    `json:"controller_settings"`
	Weight             WeightParams `json:"weight"` // the LVS formula's keys, whichever controller runs
	AgentExpirySeconds float64      `json:"agent_expiry_seconds"`
	SlowStartSeconds   float64      `json:"slow_start_seconds"`
	FreezeShare        float64      `json:"freeze_share"`
}

// Setting is one configuration key within its table and its value.
type Setting struct {
	Key   string  `json:"key"`
	Value float64 `json:"value"`
}

// WeightParams are the parameters of w ← w + gain·∛(target − load),
// bounded to [min, scale·default].
type WeightParams struct {
	Gain      float64 `json:"gain"`
	Target    float64 `json:"target"`
	Scale     float64 `json:"scale"`
	Min       int     `json:"min"`
	Threshold int     `json:"threshold"`
}

// ReloadStatus is the outcome of the last configuration reload (SIGHUP or
// lvsctl reload).
type ReloadStatus struct {
	// At is the last reload attempt; absent if there was none.
	At *time.Time `json:"at,omitempty"`
	// OK is false when the last attempt failed; the configuration loaded
	// before it is still running.
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
}

// ServiceStatus is one configured virtual service.
type ServiceStatus struct {
	Service string `json:"service"` // as ipvsadm names it: VIP:PORT/proto or fwmark:N
	// Scheduler is the service's IPVS scheduler as the last cycle read it
	// from the table ("wrr", "wlc", …, as ipvsadm shows it); empty before
	// the first cycle or when the service is not in the table.
	Scheduler string         `json:"scheduler,omitempty"`
	Frozen    bool           `json:"frozen"`
	Summary   ServiceSummary `json:"summary"`
	Servers   []ServerStatus `json:"servers"`
}

// ServiceSummary counts a service's configured servers at the last cycle.
// Each server is in exactly one count, the first that applies: Drained and
// Down by the ownership record (whatever the weight), then NotInTable,
// then InRotation (kernel weight above 0), else ZeroWeight.
type ServiceSummary struct {
	// InRotation: in the table with a kernel weight above 0, so IPVS
	// schedules new connections to them (a server failing its probe while
	// its service is frozen, or whose weight could not be set to 0, is
	// still in rotation).
	InRotation int `json:"in_rotation"`
	// Drained: weight 0 set by an operator (OwnershipDrained).
	Drained int `json:"drained"`
	// Down: weight 0 set by lvs-monitor after failed probes (OwnershipDown).
	Down int `json:"down"`
	// NotInTable: configured but not in the IPVS table at the last cycle
	// (every server before the first cycle).
	NotInTable int `json:"not_in_table"`
	// ZeroWeight: any other server in the table at weight 0 — none is
	// expected, weight.min being at least 1; counted so that the counts
	// add up to the configured servers.
	ZeroWeight int `json:"zero_weight"`
	// WeightSum is the sum of the kernel weights of the servers in the
	// table; DefaultSum the sum of every configured server's default
	// weight. WeightSum below DefaultSum is capacity out of rotation or
	// weighted down.
	WeightSum  int `json:"weight_sum"`
	DefaultSum int `json:"default_sum"`
}

// ServerStatus is one configured real server at the last cycle.
type ServerStatus struct {
	Server string `json:"server"` // RIP:PORT
	// State is one of the State* constants.
	State string `json:"state"`
	// Ownership is the monitor's record: one of the Ownership* constants.
	Ownership string `json:"ownership,omitempty"`
	// SetBy says who set the weight that stands: "lvs-monitor",
	// "operator", "health-checker" (the service's health_checker) or
	// "table" (adopted as found); absent when the record predates it.
	SetBy         string `json:"set_by,omitempty"`
	KernelWeight  int    `json:"kernel_weight"`
	DefaultWeight int    `json:"default_weight"`
	// Load is the aggregate load (0 idle, 1 fully loaded); absent when it
	// was not computed (drained, down, agent failing, …).
	Load *float64 `json:"load,omitempty"`
	// Inputs are the normalised inputs behind Load; absent with it.
	Inputs *Inputs `json:"inputs,omitempty"`
	// DirectorOnly is true when the agent is stale and Load comes from
	// INPUT and RESPONSE alone (the agent's inputs are then absent).
	DirectorOnly  bool `json:"director_only,omitempty"`
	ActiveConns   int  `json:"active_connections"`
	InactiveConns int  `json:"inactive_connections"`
	// NewConns is the number of connections scheduled to the server during
	// the last interval; -1 when unknown (first reading).
	NewConns int64 `json:"new_connections"`
	// Ramp is the slow-start share, 1 when not ramping.
	Ramp            float64 `json:"ramp"`
	ProbeRTTSeconds float64 `json:"probe_rtt_seconds,omitempty"`
	ProbeError      string  `json:"probe_error,omitempty"`
	AgentError      string  `json:"agent_error,omitempty"`
	// AgentLastOK is when lvs-monitor last got a good reply from the
	// server's agent (start of that cycle); absent if never since the
	// daemon started. AgentAgeSeconds is Now − AgentLastOK.
	AgentLastOK     *time.Time `json:"agent_last_ok,omitempty"`
	AgentAgeSeconds *float64   `json:"agent_age_seconds,omitempty"`
	// LastChange says why the weight or ownership changed in the last
	// cycle, if it did.
	LastChange string `json:"last_change,omitempty"`
	// Capacity are the capacity controller's figures behind the weight;
	// absent when that controller did not decide for the server this
	// cycle (controller "lvs", a follower, drained, down, …).
	Capacity *Capacity `json:"capacity,omitempty"`
}

// Capacity are the capacity controller's figures for one server in one
// cycle, as its decision recorded them.
type Capacity struct {
	// Factor is the server's capacity per unit of default weight ÷ its
	// service's median; absent when there is no estimate to compare.
	Factor *float64 `json:"factor,omitempty"`
	// CPU is the CPU busy fraction over the interval.
	CPU float64 `json:"cpu"`
	// Busy is the busy fraction the estimate used: that of Bottleneck,
	// the busiest of the resources the coefficients enable ("cpu",
	// "disk", "memory").
	Busy       float64 `json:"busy"`
	Bottleneck string  `json:"bottleneck,omitempty"`
	// Reading is what the connections served were divided by when the
	// coefficients moved it from Busy (their sensitivities,
	// docs/developer/design.md), and Driver the input that moved it most ("cpu",
	// "disk", "memory", "input", "response", "process"); both absent when
	// it is Busy (the shipped coefficients).
	Reading float64 `json:"reading,omitempty"`
	Driver  string  `json:"driver,omitempty"`
	// Estimate is the smoothed capacity, connections served per unit of
	// Busy; 0 when there is none yet.
	Estimate float64 `json:"estimate"`
	// Error is the estimate's relative standard error, from how much its
	// observations scatter; moves within twice it are not made.
	Error float64 `json:"error,omitempty"`
	// Weight is the controller's weight for the server; 0 when it has no
	// estimate yet.
	Weight int `json:"weight"`
	// SaturatedAlone: the server is saturated while its service's median
	// is not, and served significantly less per unit of busy than its
	// estimate: it has lost capacity, and its weight falls at once.
	SaturatedAlone bool `json:"saturated_alone,omitempty"`
	// BacklogCut: the backlog guard holds the server cut and its factor
	// is below the anchor: its weight falls at once, as when saturated
	// alone.
	BacklogCut bool `json:"backlog_cut,omitempty"`
	// Rule names the rule that held the weight this cycle: "TH1 light"
	// (every server of the service below weight.light busy: nothing
	// decided) or "TH2 close" (within weight.anchor of the median: the
	// default weight); absent when none did.
	Rule string `json:"rule,omitempty"`
}

// Inputs are a server's normalised inputs (0 idle, 1 fully loaded).
//
// The agent's figures (CPU, Memory, Disk, Process) are absent when the
// agent was not used this cycle (stale or failing): not measured, not 0.
type Inputs struct {
	Input    float64  `json:"input"`
	CPU      *float64 `json:"cpu,omitempty"`
	Memory   *float64 `json:"memory,omitempty"`
	Disk     *float64 `json:"disk,omitempty"`
	Response float64  `json:"response"`
	Process  *float64 `json:"process,omitempty"`
}

// Target names a real server of a virtual service: the body of drain and
// undrain.
type Target struct {
	Service string `json:"service"`
	Server  string `json:"server"`
}

// Ack is the reply to drain and undrain.
type Ack struct {
	Service string `json:"service"`
	Server  string `json:"server"`
	// Weight is the kernel weight after the request (0 after a drain; the
	// first slow-start step after an undrain).
	Weight int `json:"weight"`
	// DefaultWeight is the weight an undrained server ramps up to.
	DefaultWeight int    `json:"default_weight"`
	Message       string `json:"message"`
	// LocalOnly: in a director pair, the peer did not confirm that it
	// holds the request (unreachable, or silent past the wait); Message
	// says why. The request holds on this director.
	LocalOnly bool `json:"local_only,omitempty"`
}

// Connections is the reply to GET /v1/connections: one real server's
// weight and connection counts, read from the IPVS table now (Live) or,
// when the daemon has no table reader, from the last cycle.
type Connections struct {
	Service       string    `json:"service"`
	Server        string    `json:"server"`
	Weight        int       `json:"weight"`
	ActiveConns   int       `json:"active_connections"`
	InactiveConns int       `json:"inactive_connections"`
	Live          bool      `json:"live"`
	At            time.Time `json:"at"`
	// PersistConns is how many persistence templates point at the
	// server (ipvsadm -L --persistent-conn), read live after the counts
	// above; nil when the daemon cannot read them (no live table, or an
	// older daemon). While one lives, new connections from its client
	// can still reach the server, weight 0 or not.
	PersistConns *int `json:"persistence_templates,omitempty"`
	// PersistTimeoutSeconds is the service's persistence timeout
	// (ipvsadm -p), 0 when it is not persistent: the kernel sets a
	// template's timer to it at each new connection through the
	// template, and again when it runs out while the template still has
	// connections.
	PersistTimeoutSeconds int `json:"persistence_timeout_seconds,omitempty"`
}

// Reload is the reply to POST /v1/reload.
type Reload struct {
	OK bool `json:"ok"`
	// Notes are things the operator should know about an accepted
	// configuration, e.g. keys that take effect only at restart.
	Notes []string `json:"notes,omitempty"`
	Error string   `json:"error,omitempty"`
}

// Explanation is the reply to GET /v1/explain: the whole computation of a
// server's weight in the last cycle.
type Explanation struct {
	Service    string    `json:"service"`
	Server     string    `json:"server"`
	CycleStart time.Time `json:"cycle_start"`
	State      string    `json:"state"`
	Ownership  string    `json:"ownership"`
	// SetBy: who set the weight that stands (as in ServerStatus).
	SetBy string `json:"set_by,omitempty"`
	// KernelWeight is the weight after the cycle's write, if any.
	KernelWeight  int `json:"kernel_weight"`
	DefaultWeight int `json:"default_weight"`
	// Terms are the six inputs in the formula's order.
	Terms []Term `json:"terms"`
	// Load is the aggregate load; absent when not computed.
	Load *float64 `json:"load,omitempty"`
	// DirectorOnly is true when the agent is stale and Load is
	// (input·INPUT + response·RESPONSE) / (input + response).
	DirectorOnly bool `json:"director_only,omitempty"`
	// Formula is the weight step; absent when the formula did not run.
	Formula  *Formula     `json:"formula,omitempty"`
	Weight   WeightParams `json:"weight_params"`
	Decision string       `json:"decision"`
}

// Term is one input's part of the aggregate load.
type Term struct {
	Name string `json:"name"` // input, cpu, memory, disk, response, process
	// Raw is what was measured, in words with units ("412 new
	// connections, service mean 380.3"); RawValue the main figure.
	Raw         string   `json:"raw"`
	RawValue    *float64 `json:"raw_value,omitempty"`
	RawUnit     string   `json:"raw_unit,omitempty"`
	Normalised  float64  `json:"normalised"`
	Coefficient float64  `json:"coefficient"`
	Product     float64  `json:"product"` // normalised × coefficient
	// NotMeasured: the figure was not measured this cycle (the agent's,
	// when it is stale or failing); Normalised and Product are 0 and
	// count for nothing.
	NotMeasured bool `json:"not_measured,omitempty"`
}

// Formula is one step of w ← w + gain·∛(target − load), capped to
// [min, max] and scaled by the slow-start ramp.
type Formula struct {
	Before float64 `json:"before"` // controller weight before the step
	Gain   float64 `json:"gain"`
	Target float64 `json:"target"`
	Load   float64 `json:"load"`
	Step   float64 `json:"step"`  // gain·∛(target − load)
	Raw    float64 `json:"raw"`   // before + step
	Min    float64 `json:"min"`   // weight.min
	Max    float64 `json:"max"`   // scale × default weight (≤ 65535)
	After  float64 `json:"after"` // raw bounded to [min, max]: the controller weight kept
	Ramp   float64 `json:"ramp"`  // slow-start factor, 1 when not ramping
	Next   int     `json:"next"`  // max(min, round(after × ramp)): the candidate weight
	// KernelBefore is the kernel weight the candidate was compared with:
	// the weight the cycle read (-1 from daemons that did not record it);
	// Threshold the configured threshold; Passes says
	// |next − kernel| > threshold.
	KernelBefore int  `json:"kernel_before"`
	Threshold    int  `json:"threshold"`
	Passes       bool `json:"passes"`
	// Overrule says why the candidate was to be written although it does
	// not pass the threshold (a slow-start step, a kernel weight outside
	// [min, max]); empty when the threshold decided.
	Overrule string `json:"overrule,omitempty"`
	Written  bool   `json:"written"`
}

// Error is the body of every failed reply.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"error"`
	// Status is the HTTP status of the reply (not sent; filled by Client).
	Status int `json:"-"`
}

// Error codes.
const (
	CodeBadRequest   = "bad_request"   // malformed service or server, bad body
	CodeNotManaged   = "not_managed"   // not a configured service and server (use ipvsadm)
	CodeNotFound     = "not_found"     // configured, but not in the IPVS table
	CodeConflict     = "conflict"      // the weight changed under the request; retry
	CodeReloadFailed = "reload_failed" // the new configuration was refused; the old one runs
	CodeUnavailable  = "unavailable"   // the daemon cannot do this now (no reload function, no cycle yet)
	CodeInternal     = "internal"
)

func (e *Error) Error() string { return e.Message }
