package policy

import (
	"slices"
	"time"
)

// Inputs are one real server's normalised inputs for one interval, each on
// the scale 0 = idle, 1 = fully loaded, above 1 = overloaded.
type Inputs struct {
	Input    float64 // share of new connections relative to the service mean
	CPU      float64
	Memory   float64
	Disk     float64
	Response float64
	Process  float64
}

// AggregateLoad combines the inputs with the coefficients R1..R6:
//
//	load = R1·INPUT + R2·CPU + R3·MEMORY + R4·DISK + R5·RESPONSE + R6·PROCESS
func AggregateLoad(in Inputs, c Coefficients) float64 {
	return c.Input*in.Input + c.CPU*in.CPU + c.Memory*in.Memory +
		c.Disk*in.Disk + c.Response*in.Response + c.Process*in.Process
}

// NeutralInput is the INPUT of a server when the share of new connections
// cannot be measured: no traffic reached the service in the interval, or the
// server has no earlier counter reading yet. It is the value every server has
// when traffic is perfectly even, so missing data neither raises nor lowers
// a server against the others.
const NeutralInput = 1.0

// InputLoads computes INPUT_i = N_i / (ΣN_j / n) for the servers in rotation,
// where N_i is the number of new connections server i received in the
// interval (from counter deltas). A negative N_i means "unknown" (no earlier
// reading): that server gets NeutralInput and is left out of the mean. When
// no known server received any connection, every server gets NeutralInput.
// The result is never NaN or infinite.
func InputLoads(newConns []int64) []float64 {
	return inputLoadsInto(make([]float64, len(newConns)), newConns)
}

// inputLoadsInto is InputLoads written to out (len(newConns) long).
func inputLoadsInto(out []float64, newConns []int64) []float64 {
	var sum int64
	known := 0
	for _, n := range newConns {
		if n >= 0 {
			sum += n
			known++
		}
	}
	for i, n := range newConns {
		if n < 0 || sum == 0 {
			out[i] = NeutralInput
			continue
		}
		mean := float64(sum) / float64(known)
		out[i] = float64(n) / mean
	}
	return out
}

// ResponseLoad normalises a measured response time against the reference
// time that counts as fully loaded: RESPONSE = rtt / reference.
func ResponseLoad(rtt, reference time.Duration) float64 {
	if reference <= 0 || rtt < 0 {
		return 0
	}
	return float64(rtt) / float64(reference)
}

// DirectorOnlyLoad is the aggregate load of a server whose agent is stale:
// only the inputs the director measures itself (INPUT and RESPONSE) count,
// with their coefficients renormalised to sum to 1. ok is false when both
// coefficients are 0: there is then nothing to compute a load from.
func DirectorOnlyLoad(in Inputs, c Coefficients) (load float64, ok bool) {
	sum := c.Input + c.Response
	if sum <= 0 {
		return 0, false
	}
	return (c.Input*in.Input + c.Response*in.Response) / sum, true
}

// median returns the median of v (0 for none); v is reordered.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}
