package control

import (
	"fmt"
	"reflect"
	"sync"

	"lvs-feedback/monitor"
)

// Reloadable is what a configuration reload needs of the monitor.
// *monitor.Monitor implements it.
type Reloadable interface {
	Status() monitor.Status
	Reload(cfg monitor.Config)
	ReloadFailed(err error)
}

var _ Reloadable = (*monitor.Monitor)(nil)

// FileReloader returns the ReloadFunc of lvs-monitor: it re-reads and
// checks the file at path. An invalid file is recorded with ReloadFailed
// (the running configuration stays; status and the
// config_last_reload_successful metric show it) and returned. A valid one
// is applied with Reload, from the next cycle.
//
// state_dir, metrics_listen, control_socket and [sync] are set up once at start:
// a new value is noted and the running one kept, so that status tells the
// truth.
//
// Reloads are serialised: SIGHUP and lvsctl reload may race.
func FileReloader(path string, m Reloadable) ReloadFunc {
	var mu sync.Mutex
	return func() ([]string, error) {
		mu.Lock()
		defer mu.Unlock()
		cfg, warnings, err := monitor.CheckConfigFile(path)
		if err != nil {
			m.ReloadFailed(err)
			return nil, err
		}
		old := m.Status().Config
		var notes []string
		// The same warnings -check prints: settings the controller ignores.
		for _, w := range warnings {
			notes = append(notes, w.String())
		}
		keep := cfg
		for _, k := range []struct {
			key     string
			running string
			next    *string
		}{
			{"state_dir", old.StateDir, &keep.StateDir},
			{"metrics_listen", old.MetricsListen, &keep.MetricsListen},
			{"control_socket", old.ControlSocket, &keep.ControlSocket},
		} {
			if *k.next != k.running {
				notes = append(notes, fmt.Sprintf("%s changed from %q to %q: takes effect when lvs-monitor restarts; %q stays in use",
					k.key, k.running, *k.next, k.running))
				*k.next = k.running
			}
		}
		// The [sync] group is set up once at start (scheduler.Run).
		if !reflect.DeepEqual(old.Sync, cfg.Sync) {
			notes = append(notes, "[sync] changed: takes effect when lvs-monitor restarts; the running group settings stay in use")
			keep.Sync = old.Sync
		}
		// The history is opened once at start (lvs-monitor's main).
		if old.History != cfg.History {
			notes = append(notes, "[history] changed: takes effect when lvs-monitor restarts; the running history settings stay in use")
			keep.History = old.History
		}
		if old.Interval != cfg.Interval {
			notes = append(notes, fmt.Sprintf("interval changed from %v to %v: applies from the next cycle", old.Interval, cfg.Interval))
		}
		m.Reload(keep)
		return notes, nil
	}
}
