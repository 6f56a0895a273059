package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"

	"lvs-feedback/ipvs"
	"lvs-feedback/monitor"
)

// This file holds lvs-monitor's edges chosen by flags: the IPVS table (the
// kernel's, or with -dry-run -table a saved one in memory), the state
// store, and the cycle-by-cycle preview printed under -table.

// checkTableFlags refuses -table without -dry-run (the saved table is a
// preview: nothing could be written to the kernel from it) and with -netns.
func checkTableFlags(tableFile string, dryRun bool, netns string) error {
	if tableFile == "" {
		return nil
	}
	if !dryRun {
		return errors.New("-table runs against a saved copy of the IPVS table and needs -dry-run (lvs-monitor -dry-run -table FILE -config FILE); without -table it manages the kernel's table")
	}
	if netns != "" {
		return errors.New("-table and -netns exclude each other: -table reads the table from its file, -netns names the kernel table to manage")
	}
	return nil
}

// openTable opens the kernel's IPVS table, or with tableFile the table
// saved in it, read into memory. A saved table is never written: under
// -dry-run no write reaches it, so every cycle starts from the weights in
// the file, as the kernel's would.
func openTable(tableFile, netns string) (ipvs.Table, func(), error) {
	if tableFile != "" {
		m, err := ipvs.ReadTableFile(tableFile)
		if err != nil {
			return nil, nil, err
		}
		return m, func() {}, nil
	}
	k, err := ipvs.OpenKernel(netns)
	if err != nil {
		return nil, nil, err
	}
	return k, func() { _ = k.Close() }, nil
}

// openState returns the state file store. A dry run writes nothing, not
// even the state directory: it reads the state file if there is one and
// leaves even an unusable one where it is (monitor.NewReadOnlyFileStore).
func openState(dir string, dryRun bool) (*monitor.FileStore, error) {
	if dryRun {
		return monitor.NewReadOnlyFileStore(dir), nil
	}
	return monitor.NewFileStore(dir)
}

// wouldWrite prints, after each cycle of -dry-run -table, one line per
// weight the cycle would have written — service, server, the table's
// weight → the new one, and the cycle's own verdict (the reason the
// monitor logs) — or that there was nothing to write.
type wouldWrite struct {
	out io.Writer

	mu sync.Mutex
	n  int // cycles printed
}

func (w *wouldWrite) cycle(rep monitor.CycleReport) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	writes := 0
	for i := range rep.Dests {
		d := &rep.Dests[i]
		if !d.Outcome.DryRun {
			continue
		}
		writes++
		fmt.Fprintf(w.out, "cycle %d: %s %s weight %d → %d: %s\n", w.n, d.Key.Service, d.Key.Dest,
			d.Decision.Before, d.Decision.To, monitor.Verdict(*d, rep.Params))
	}
	if writes == 0 {
		fmt.Fprintf(w.out, "cycle %d: nothing to write (%d servers)\n", w.n, len(rep.Dests))
	}
}

// openHistory opens the cycle history in the state directory ([history]);
// nil when it is off, and in a dry run, which writes nothing.
func openHistory(cfg monitor.Config, dryRun bool, log *slog.Logger, metrics *monitor.Metrics) (*monitor.Recorder, error) {
	if dryRun || !cfg.History.Enabled {
		return nil, nil
	}
	r, err := monitor.OpenRecorder(cfg.StateDir, cfg.History, log, metrics)
	if err != nil {
		return nil, err
	}
	log.Info("history: recording every cycle", "file", r.Path(), "file_mib", cfg.History.FileMiB, "files", cfg.History.Files)
	return r, nil
}

// closeHistory writes the cycles still queued and closes the file.
func closeHistory(r *monitor.Recorder, log *slog.Logger) {
	if r == nil {
		return
	}
	if err := r.Close(); err != nil {
		log.Warn("history", "error", err)
	}
}
