package tune

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"lvs-feedback/policy"
)

// Names are the six inputs in the order of Vector, as the configuration
// and the history records name them.
var Names = [6]string{"input", "cpu", "memory", "disk", "response", "process"}

// Vector is a coefficient set as an array, in the order of Names.
type Vector [6]float64

// VectorOf returns c as a Vector.
func VectorOf(c policy.Coefficients) Vector {
	return Vector{c.Input, c.CPU, c.Memory, c.Disk, c.Response, c.Process}
}

// Coefficients returns v as policy.Coefficients.
func (v Vector) Coefficients() policy.Coefficients {
	return policy.Coefficients{Input: v[0], CPU: v[1], Memory: v[2], Disk: v[3], Response: v[4], Process: v[5]}
}

// Rounded returns v non-negative, rounded to steps of 0.01 and summing to
// exactly 1 (largest remainders get the leftover hundredths), so that it
// reads cleanly in a configuration and passes its sum check. A vector
// with nothing positive becomes the even split.
func (v Vector) Rounded() Vector {
	var sum float64
	for _, x := range v {
		sum += math.Max(0, x)
	}
	if sum <= 0 || math.IsNaN(sum) || math.IsInf(sum, 0) {
		v = Vector{1, 1, 1, 1, 1, 1}
		sum = 6
	}
	var hundredths [6]int
	var rem [6]float64
	total := 0
	for i, x := range v {
		h := math.Max(0, x) / sum * 100
		hundredths[i] = int(math.Floor(h))
		rem[i] = h - math.Floor(h)
		total += hundredths[i]
	}
	for ; total < 100; total++ {
		best := 0
		for i := range rem {
			if rem[i] > rem[best] {
				best = i
			}
		}
		hundredths[best]++
		rem[best] = -1
	}
	var out Vector
	for i, h := range hundredths {
		out[i] = float64(h) / 100
	}
	return out
}

// Block returns v as a [coefficients] table of a configuration.
func (v Vector) Block() string {
	var b strings.Builder
	b.WriteString("[coefficients]\n")
	for i, n := range Names {
		fmt.Fprintf(&b, "%s = %s\n", n, formatCoefficient(v[i]))
	}
	return b.String()
}

func formatCoefficient(x float64) string {
	s := fmt.Sprintf("%.4f", x)
	s = strings.TrimRight(s, "0")
	if strings.HasSuffix(s, ".") {
		s += "0"
	}
	return s
}

// ReplaceCoefficients returns the configuration text with its
// [coefficients] table replaced by v's (appended when it has none). A
// configuration that sets coefficients with dotted keys
// (coefficients.cpu = …) is refused rather than guessed at: the caller
// checks the result with monitor.CheckConfig in any case.
func ReplaceCoefficients(config []byte, v Vector) ([]byte, error) {
	lines := bytes.SplitAfter(config, []byte("\n"))
	var out bytes.Buffer
	inTable, replaced := false, false
	for i, line := range lines {
		t := strings.TrimSpace(string(line))
		if strings.HasPrefix(t, "[") {
			inTable = false
			if header := strings.TrimSpace(strings.SplitN(t, "#", 2)[0]); header == "[coefficients]" {
				if replaced {
					return nil, fmt.Errorf("line %d: a second [coefficients] table", i+1)
				}
				out.WriteString(v.Block())
				inTable, replaced = true, true
				continue
			}
		}
		if strings.HasPrefix(t, "coefficients.") || strings.HasPrefix(t, "coefficients =") {
			return nil, fmt.Errorf("line %d: coefficients set with dotted keys or inline; write them as a [coefficients] table", i+1)
		}
		if inTable {
			continue
		}
		out.Write(line)
	}
	if !replaced {
		if out.Len() > 0 && !bytes.HasSuffix(out.Bytes(), []byte("\n")) {
			out.WriteByte('\n')
		}
		out.WriteString("\n" + v.Block())
	}
	return out.Bytes(), nil
}
