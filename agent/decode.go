package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strings"
)

// DecodeReport reads one Report from r and checks it: at most
// MaxReportBytes, exactly one JSON object with nothing but white space after
// it, Schema == SchemaVersion, Time set, and CPU, Memory, Disk and Processes
// finite and within [0, MaxLoad], and CPUTime, when present, with Since set
// and finite totals ≥ 0 (busy at most MaxLoad × sampled). Unknown fields are ignored, so agents may
// add fields without a schema change; Raw is informational and only
// type-checked.
func DecodeReport(r io.Reader) (Report, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxReportBytes+1))
	if err != nil {
		return Report{}, fmt.Errorf("read report: %w", err)
	}
	if len(b) > MaxReportBytes {
		return Report{}, fmt.Errorf("report larger than %d bytes", MaxReportBytes)
	}
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	if len(trimmed) == 0 {
		return Report{}, errors.New("empty report")
	}
	if trimmed[0] != '{' {
		return Report{}, errors.New("report is not a JSON object")
	}
	var rep Report
	// Unmarshal, unlike a Decoder, refuses anything after the first value.
	if err := json.Unmarshal(b, &rep); err != nil {
		return Report{}, fmt.Errorf("decode report: %w", err)
	}
	if err := validate(rep); err != nil {
		return Report{}, err
	}
	return rep, nil
}

func validate(rep Report) error {
	if rep.Schema != SchemaVersion {
		return fmt.Errorf("report schema %d, want %d", rep.Schema, SchemaVersion)
	}
	if rep.Time.IsZero() {
		return errors.New("report has no time")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"cpu", rep.CPU}, {"memory", rep.Memory}, {"disk", rep.Disk}, {"processes", rep.Processes}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 || f.v > MaxLoad {
			return fmt.Errorf("report field %s = %v, want 0..%d", f.name, f.v, MaxLoad)
		}
	}
	if t := rep.CPUTime; t != nil {
		if t.Since.IsZero() {
			return errors.New("report cpu_time has no since")
		}
		for _, f := range []struct {
			name string
			v    float64
		}{{"busy_seconds", t.BusySeconds}, {"sampled_seconds", t.SampledSeconds}} {
			if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
				return fmt.Errorf("report cpu_time.%s = %v, want a finite number ≥ 0", f.name, f.v)
			}
		}
		if t.BusySeconds > MaxLoad*t.SampledSeconds {
			return fmt.Errorf("report cpu_time.busy_seconds = %v, more than %d × sampled_seconds (%v)", t.BusySeconds, MaxLoad, t.SampledSeconds)
		}
	}
	return nil
}

// StatusError is returned by Fetch when the agent answered with a status
// other than 200. An agent that answers 503 is alive but cannot measure its
// source (not sampled yet, sampling failed — e.g. the followed process
// exited — or stalled); Message carries its explanation.
type StatusError struct {
	Code    int
	Message string // the agent's "error" field, or the start of the body
}

func (e *StatusError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("status %d", e.Code)
	}
	return fmt.Sprintf("status %d: %s", e.Code, e.Message)
}

// Fetch GETs baseURL+"/v1/load" (baseURL like "http://10.0.0.5:9771") and
// decodes the reply with DecodeReport. It requires status 200 (otherwise a
// *StatusError) and a JSON content type. ctx bounds the whole exchange; c
// nil means http.DefaultClient. Errors start with "agent BASEURL:".
func Fetch(ctx context.Context, c *http.Client, baseURL string) (Report, error) {
	if c == nil {
		c = http.DefaultClient
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(baseURL, "/")+LoadPath, nil)
	if err != nil {
		return Report{}, fmt.Errorf("agent %s: %w", baseURL, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return Report{}, fmt.Errorf("agent %s: get load: %w", baseURL, err)
	}
	defer func() {
		// Drain a little so the connection can be reused, then close.
		_, _ = io.CopyN(io.Discard, resp.Body, MaxReportBytes)
		resp.Body.Close()
	}()
	if resp.StatusCode != http.StatusOK {
		return Report{}, fmt.Errorf("agent %s: %w", baseURL, statusError(resp))
	}
	ct := resp.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		return Report{}, fmt.Errorf("agent %s: content type %q, want application/json", baseURL, ct)
	}
	rep, err := DecodeReport(resp.Body)
	if err != nil {
		return Report{}, fmt.Errorf("agent %s: %w", baseURL, err)
	}
	return rep, nil
}

// statusError builds a StatusError from a non-200 reply, taking the
// message from a JSON error body when there is one.
func statusError(resp *http.Response) *StatusError {
	e := &StatusError{Code: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	var er errorReply
	if json.Unmarshal(b, &er) == nil && er.Error != "" {
		e.Message = er.Error
	} else {
		e.Message = strings.ToValidUTF8(strings.TrimSpace(string(b)), "?")
		if len(e.Message) > 200 {
			e.Message = e.Message[:200]
		}
	}
	return e
}
