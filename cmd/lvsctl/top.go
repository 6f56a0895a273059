package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/term"

	"lvs-feedback/control/api"
)

// top polls lvs-monitor's status, about twice an interval, and draws a
// frame each time a new cycle has completed: every service and server with
// its weight and default, state, the figures its weight is decided from,
// new connections per second, connections, and its last change with the
// reason lvs-monitor recorded for it. Everything shown is read from the
// status; nothing is recomputed here except the per-second rate (new
// connections of the interval ÷ the interval).
//
// On a terminal it takes the screen (alternate screen, no cursor) and gives
// it back on q, Ctrl-C or a signal; elsewhere it prints one frame after
// another (batch mode).
func (c *cli) top(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("top", flag.ContinueOnError)
	once := fs.Bool("once", false, "print the current frame and exit")
	frames := fs.Int("n", 0, "exit after `N` frames, one per cycle (0: until q or Ctrl-C)")
	refresh := fs.Duration("refresh", 0, "poll period (default half the monitor's interval, from 100ms to 5s)")
	pos, code, done := c.parse(fs, args)
	if done {
		return code
	}
	switch {
	case len(pos) > 0:
		return c.commandUsage("top", "no arguments, got %q", pos)
	case *frames < 0:
		return c.commandUsage("top", "-n must be 0 or more, got %d", *frames)
	case *refresh < 0:
		return c.commandUsage("top", "-refresh must be positive, got %v", *refresh)
	}
	if *once {
		*frames = 1
	}
	cl := c.client()
	st, err := cl.Status(ctx)
	if err != nil {
		return c.fail(err) // unreachable at the start: say so and stop, as status does
	}

	scr, err := openScreen(c.stdout)
	if err != nil {
		return c.fail(err)
	}
	if scr != nil {
		defer scr.close()
	}
	mem := newTopMemory()
	var pollErr string
	drawn := false
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		redraw := mem.observe(st) || !drawn
		if scr != nil && scr.resized() {
			redraw = true
		}
		if redraw {
			f := topFrame{Status: st, Frame: mem.frames, Changes: mem.changes, Error: pollErr, Keys: scr != nil && scr.keys}
			if scr != nil {
				w, h := scr.size()
				scr.draw(renderTop(f, c.location(), w, h))
			} else {
				if drawn {
					fmt.Fprintln(c.stdout)
				}
				for _, l := range renderTop(f, c.location(), 0, 0) {
					fmt.Fprintln(c.stdout, l)
				}
			}
			drawn = true
		}
		if *frames > 0 && mem.frames >= *frames {
			return exitOK
		}
		timer.Reset(pollPeriod(*refresh, st.Config.IntervalSeconds))
		var quit <-chan struct{}
		var resize <-chan os.Signal
		if scr != nil {
			quit, resize = scr.quit, scr.resize
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-quit:
			return exitOK
		case <-resize:
			scr.sizeChanged = true
			continue
		case <-timer.C:
		}
		next, err := cl.Status(ctx)
		switch {
		case ctx.Err() != nil:
			return exitOK
		case err != nil:
			// lvs-monitor restarting, or gone: keep the last frame, say
			// so under it, and keep trying.
			msg := fmt.Sprintf("%s: %s (retrying)", c.now().In(c.location()).Format("15:04:05"), firstLine(err.Error()))
			if msg != pollErr {
				pollErr, drawn = msg, false
			}
		default:
			if pollErr != "" {
				pollErr, drawn = "", false
			}
			st = next
		}
	}
}

// pollPeriod is how often top asks for the status: the -refresh flag, else
// half the interval, so that a frame is at most half an interval late.
func pollPeriod(flagValue time.Duration, intervalSeconds float64) time.Duration {
	if flagValue > 0 {
		return flagValue
	}
	return min(max(time.Duration(intervalSeconds*float64(time.Second))/2, 100*time.Millisecond), 5*time.Second)
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// topMemory is what top carries from one status to the next.
type topMemory struct {
	frames  int // frames drawn: cycles seen since top started
	cycle   time.Time
	changes map[string]lastChange // by serverKey
}

// lastChange is the last change top saw for a server: the start of the
// cycle that recorded it, and the reason recorded.
type lastChange struct {
	At  time.Time
	Why string
}

func newTopMemory() *topMemory { return &topMemory{changes: map[string]lastChange{}} }

func serverKey(service, server string) string { return service + " " + server }

// observe takes a status in and reports whether it is from a cycle not yet
// shown (the first status always is, even before the first cycle); each
// server's recorded change is kept with its cycle's start.
func (m *topMemory) observe(st api.Status) bool {
	var start time.Time
	if st.Cycle != nil {
		start = st.Cycle.Start
	}
	if m.frames > 0 && start.Equal(m.cycle) {
		return false
	}
	m.frames++
	m.cycle = start
	for _, svc := range st.Services {
		for _, s := range svc.Servers {
			if s.LastChange != "" {
				m.changes[serverKey(svc.Service, s.Server)] = lastChange{At: start, Why: s.LastChange}
			}
		}
	}
	return true
}

// topFrame is everything one frame shows.
type topFrame struct {
	Status  api.Status
	Frame   int                   // frames drawn so far, this one included
	Changes map[string]lastChange // by serverKey
	Error   string                // the last poll failed: why
	Keys    bool                  // q quits (the terminal is in raw mode)
}

// renderTop lays a frame out in lines of at most width characters and at
// most height lines (0: no bound, batch mode). It is a pure function of
// its arguments.
func renderTop(f topFrame, loc *time.Location, width, height int) []string {
	st := f.Status
	var b strings.Builder
	quit := "Ctrl-C quits"
	if f.Keys {
		quit = "q quits"
	}
	if st.Cycle == nil {
		fmt.Fprintf(&b, "lvs-monitor top  frame %d  no cycle completed yet, interval %gs  %s\n", f.Frame, st.Config.IntervalSeconds, quit)
	} else {
		fmt.Fprintf(&b, "lvs-monitor top  frame %d  cycle %s (took %s, %d written), interval %gs  %s\n",
			f.Frame, st.Cycle.Start.In(loc).Format("15:04:05"),
			time.Duration(st.Cycle.DurationSeconds*float64(time.Second)).Round(time.Microsecond), st.Cycle.Writes,
			st.Config.IntervalSeconds, quit)
	}
	if !st.Reload.OK {
		fmt.Fprintf(&b, "config: LAST RELOAD FAILED, the earlier configuration runs: %s\n", firstLine(st.Reload.Error))
	}
	if sy := st.Sync; sy != nil {
		what := "follower"
		if sy.Writer {
			what = "writer"
		}
		fmt.Fprintf(&b, "sync: %s, %s (leader %s)\n", sy.ID, what, sy.Leader)
	}
	interval := st.Config.IntervalSeconds
	for _, svc := range st.Services {
		b.WriteString("\n")
		title := svc.Service
		if svc.Scheduler != "" {
			title += "  scheduler " + svc.Scheduler
		}
		if svc.Frozen {
			title += "  FROZEN (fail static)"
		}
		fmt.Fprintf(&b, "%s  %s\n", title, summaryText(svc.Summary))
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  SERVER\tWEIGHT\tSTATE\tNEW/s\tACTIVE\tLOAD\tCPU\tRESP\tCAPACITY\tLAST CHANGE")
		for _, s := range svc.Servers {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Server, weightText(s), stateText(s),
				rateText(s, interval), activeText(s), f2(s.Load), cpuText(s), respText(s), capacityText(s.Capacity),
				changeText(f.Changes[serverKey(svc.Service, s.Server)], loc))
		}
		tw.Flush()
	}
	if f.Error != "" {
		fmt.Fprintf(&b, "\nlvs-monitor unreachable at %s\n", f.Error)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if height > 0 && len(lines) > height {
		more := len(lines) - height + 1
		lines = append(lines[:height-1], fmt.Sprintf("… %d more lines: enlarge the terminal, or lvsctl status", more))
	}
	if width > 0 {
		for i, l := range lines {
			lines[i] = clip(l, width)
		}
	}
	return lines
}

// clip cuts s to width characters (every character top prints is one
// column wide).
func clip(s string, width int) string {
	n := 0
	for i := range s {
		if n == width {
			return s[:i]
		}
		n++
	}
	return s
}

func inTable(s api.ServerStatus) bool {
	return s.State != api.StateAbsent && s.State != api.StatePending
}

// weightText is "kernel/default".
func weightText(s api.ServerStatus) string {
	if !inTable(s) {
		return fmt.Sprintf("-/%d", s.DefaultWeight)
	}
	return fmt.Sprintf("%d/%d", s.KernelWeight, s.DefaultWeight)
}

// rateText is the new connections per second over the last interval.
func rateText(s api.ServerStatus, intervalSeconds float64) string {
	if !inTable(s) || s.NewConns < 0 || intervalSeconds <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(s.NewConns)/intervalSeconds)
}

func activeText(s api.ServerStatus) string {
	if !inTable(s) {
		return "-"
	}
	return fmt.Sprint(s.ActiveConns)
}

func f2(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *p)
}

// cpuText is the busy fraction the weight was decided from: the capacity
// controller's when it decided, else the CPU input of the load.
func cpuText(s api.ServerStatus) string {
	switch {
	case s.Capacity != nil:
		return fmt.Sprintf("%.2f", s.Capacity.CPU)
	case s.Inputs != nil:
		return f2(s.Inputs.CPU)
	}
	return "-"
}

// respText is the probe's response time, or "fail".
func respText(s api.ServerStatus) string {
	switch {
	case s.ProbeError != "":
		return "fail"
	case s.ProbeRTTSeconds > 0:
		return time.Duration(s.ProbeRTTSeconds * float64(time.Second)).Round(time.Millisecond).String()
	}
	return "-"
}

// capacityText is the capacity controller's factor (capacity per unit of
// default weight ÷ the service's median), "×1.08"; "sat" marks a server
// saturated while its peers are not, "cut" one the backlog guard holds cut
// (either moves at once).
func capacityText(c *api.Capacity) string {
	if c == nil || c.Factor == nil {
		return "-"
	}
	t := fmt.Sprintf("×%.2f", *c.Factor)
	if c.SaturatedAlone {
		t += " sat"
	}
	if c.BacklogCut {
		t += " cut"
	}
	return t
}

func changeText(c lastChange, loc *time.Location) string {
	if c.Why == "" {
		return "-"
	}
	return c.At.In(loc).Format("15:04:05") + " " + firstLine(c.Why)
}

// screen is the terminal top draws on.
type screen struct {
	out   *os.File
	in    *os.File
	saved *term.State // the input terminal's mode before raw, nil if not changed
	keys  bool        // keys are read: q quits

	quit     chan struct{}
	quitOnce sync.Once
	resize   chan os.Signal

	sizeChanged bool
	w, h        int
}

// openScreen takes the terminal when out is one: alternate screen, hidden
// cursor and, when standard input is a terminal too, raw mode so that q
// quits. It returns nil when out is not a terminal.
func openScreen(out io.Writer) (*screen, error) {
	f, ok := out.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, nil
	}
	s := &screen{out: f, in: os.Stdin, quit: make(chan struct{}), resize: make(chan os.Signal, 1)}
	if term.IsTerminal(int(s.in.Fd())) {
		saved, err := term.MakeRaw(int(s.in.Fd()))
		if err != nil {
			return nil, fmt.Errorf("top: terminal raw mode: %w", err)
		}
		s.saved, s.keys = saved, true
		go s.readKeys()
	}
	signal.Notify(s.resize, syscall.SIGWINCH)
	s.w, s.h = s.size()
	io.WriteString(s.out, "\x1b[?1049h\x1b[?25l\x1b[H\x1b[2J") // alternate screen, hide cursor, clear
	return s, nil
}

// readKeys closes quit at q, Q or Ctrl-C (raw mode turns Ctrl-C into a
// byte rather than SIGINT).
func (s *screen) readKeys() {
	buf := make([]byte, 64)
	for {
		n, err := s.in.Read(buf)
		for _, b := range buf[:n] {
			if b == 'q' || b == 'Q' || b == 3 {
				s.quitOnce.Do(func() { close(s.quit) })
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (s *screen) size() (int, int) {
	w, h, err := term.GetSize(int(s.out.Fd()))
	if err != nil || w <= 0 || h <= 0 {
		return 80, 24
	}
	return w, h
}

// resized reports a size change since the last frame.
func (s *screen) resized() bool {
	changed := s.sizeChanged
	s.sizeChanged = false
	if w, h := s.size(); w != s.w || h != s.h {
		s.w, s.h, changed = w, h, true
	}
	return changed
}

// draw writes a frame over the previous one, in one write: each line
// overwritten and cleared to its end, then the rest of the screen cleared
// (no full clear, so no flicker). Raw mode has no newline translation,
// hence \r\n.
func (s *screen) draw(lines []string) {
	var b strings.Builder
	b.WriteString("\x1b[H")
	for i, l := range lines {
		if i > 0 {
			b.WriteString("\r\n")
		}
		b.WriteString(l)
		b.WriteString("\x1b[K")
	}
	b.WriteString("\x1b[J")
	io.WriteString(s.out, b.String())
}

// close gives the terminal back as it was.
func (s *screen) close() {
	signal.Stop(s.resize)
	io.WriteString(s.out, "\x1b[?25h\x1b[?1049l") // show cursor, leave the alternate screen
	if s.saved != nil {
		if err := term.Restore(int(s.in.Fd()), s.saved); err != nil && !errors.Is(err, os.ErrClosed) {
			fmt.Fprintf(os.Stderr, "lvsctl: top: restoring the terminal: %v\n", err)
		}
	}
}
