package sim

import "fmt"

// Dest is a scheduler's view of one destination, as the kernel holds it:
// its weight and its active and inactive connection counts.
type Dest struct {
	Weight   int
	Active   int
	Inactive int
}

// Scheduler reproduces one Linux IPVS scheduler's choice of destination,
// including its tie-breaks. Destinations are in the kernel's list order
// (index 0 first). No scheduler picks a destination of weight 0. The
// destinations' overload flag (upper connection threshold) is not modelled.
type Scheduler interface {
	Name() string
	// Schedule returns the index of the destination for a new connection,
	// or -1 when none is available.
	Schedule(d []Dest) int
	// DestChanged is the kernel's upd_dest/add_dest/del_dest hook, called
	// after any destination edit (every weight write).
	DestChanged(d []Dest)
}

// NewScheduler returns the named scheduler initialised for d (the
// scheduler's init_service).
func NewScheduler(name string, d []Dest) (Scheduler, error) {
	switch name {
	case "rr":
		return &rrSched{last: -1}, nil
	case "wrr":
		s := &wrrSched{}
		s.init(d)
		return s, nil
	case "lc":
		return lcSched{}, nil
	case "wlc":
		return wlcSched{}, nil
	case "sed":
		return sedSched{}, nil
	}
	return nil, fmt.Errorf("unknown scheduler %q (want one of %v)", name, SchedulerNames)
}

// rrSched is ip_vs_rr.c: a cursor on the last destination chosen (initially
// the list head); each connection goes to the next destination after it, in
// list order and wrapping, whose weight is above 0. Weight edits do not
// move the cursor (rr has no upd_dest).
type rrSched struct{ last int }

func (*rrSched) Name() string { return "rr" }

func (s *rrSched) Schedule(d []Dest) int {
	n := len(d)
	if n == 0 {
		return -1
	}
	start := s.last + 1 // from the head when last is -1
	for k := 0; k < n; k++ {
		i := (start + k) % n
		if d[i].Weight > 0 {
			s.last = i
			return i
		}
	}
	return -1
}

func (*rrSched) DestChanged([]Dest) {}

// wrrSched is ip_vs_wrr.c: rounds over the list with a current weight cw
// that starts at the maximum weight and falls by the weights' gcd after each
// pass; a pass picks, in list order, every destination whose weight is at
// least cw. Every destination edit puts the cursor back on the list head,
// recomputes gcd and maximum, and keeps cw unless it exceeds the new maximum
// (or is 0), in which case it restarts at the maximum; with a gcd above 1,
// cw is realigned to the gcd grid.
type wrrSched struct {
	cl int // cursor: index of the last destination chosen; -1 = list head
	cw int // current weight
	mw int // maximum weight − (gcd − 1)
	di int // decreasing interval: gcd of the positive weights
}

func (*wrrSched) Name() string { return "wrr" }

func gcdInt(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func wrrGCD(d []Dest) int {
	g := 0
	for _, x := range d {
		if x.Weight > 0 {
			if g > 0 {
				g = gcdInt(x.Weight, g)
			} else {
				g = x.Weight
			}
		}
	}
	if g == 0 {
		return 1
	}
	return g
}

func wrrMax(d []Dest) int {
	m := 0
	for _, x := range d {
		m = max(m, x.Weight)
	}
	return m
}

func (s *wrrSched) init(d []Dest) {
	s.cl = -1
	s.di = wrrGCD(d)
	s.mw = wrrMax(d) - (s.di - 1)
	s.cw = s.mw
}

func (s *wrrSched) DestChanged(d []Dest) {
	s.cl = -1
	s.di = wrrGCD(d)
	s.mw = wrrMax(d) - (s.di - 1)
	if s.cw > s.mw || s.cw == 0 {
		s.cw = s.mw
	} else if s.di > 1 {
		s.cw = (s.cw/s.di)*s.di + 1
	}
}

func (s *wrrSched) Schedule(d []Dest) int {
	if s.mw <= 0 {
		return -1 // no available destination
	}
	dest := s.cl
	last := dest
	stop := -2 // none
	lastPass, restarted := false, false
	for {
		for i := dest + 1; i < len(d); i++ {
			if d[i].Weight >= s.cw {
				s.cl = i
				return i
			}
			if i == stop {
				s.cl = i
				return -1
			}
		}
		dest = -1 // the list walk ends on the head
		s.cw -= s.di
		if s.cw <= 0 {
			s.cw = s.mw
			if lastPass || last == -1 {
				s.cl = dest
				return -1
			}
			restarted = true
		}
		lastPass = s.cw <= s.di
		if lastPass && restarted && last != -1 {
			stop = last
		}
	}
}

// overhead is ip_vs_dest_conn_overhead: active·256 + inactive.
func overhead(x Dest) int64 { return int64(x.Active)<<8 + int64(x.Inactive) }

// lcSched is ip_vs_lc.c: the least overhead (active·256 + inactive) among
// destinations of weight above 0; a tie goes to the one listed first.
type lcSched struct{}

func (lcSched) Name() string       { return "lc" }
func (lcSched) DestChanged([]Dest) {}
func (lcSched) Schedule(d []Dest) int {
	least := -1
	var loh int64
	for i, x := range d {
		if x.Weight == 0 {
			continue
		}
		if doh := overhead(x); least < 0 || doh < loh {
			least, loh = i, doh
		}
	}
	return least
}

// weightedLeast is the shared body of ip_vs_wlc.c and ip_vs_sed.c: start
// from the first destination of weight above 0, then take a later one only
// when its overhead/weight is strictly smaller, compared by
// cross-multiplication (loh·w_d > doh·w_least). A tie stays with the
// destination listed first; weight 0 is never taken.
func weightedLeast(d []Dest, oh func(Dest) int64) int {
	least := -1
	for i, x := range d {
		if x.Weight > 0 {
			least = i
			break
		}
	}
	if least < 0 {
		return -1
	}
	loh := oh(d[least])
	for i := least + 1; i < len(d); i++ {
		doh := oh(d[i])
		if loh*int64(d[i].Weight) > doh*int64(d[least].Weight) {
			least, loh = i, doh
		}
	}
	return least
}

// wlcSched is ip_vs_wlc.c: least (active·256 + inactive)/weight.
type wlcSched struct{}

func (wlcSched) Name() string          { return "wlc" }
func (wlcSched) DestChanged([]Dest)    {}
func (wlcSched) Schedule(d []Dest) int { return weightedLeast(d, overhead) }

// sedSched is ip_vs_sed.c (shortest expected delay): least
// (active + 1)/weight; inactive connections do not count.
type sedSched struct{}

func (sedSched) Name() string       { return "sed" }
func (sedSched) DestChanged([]Dest) {}
func (sedSched) Schedule(d []Dest) int {
	return weightedLeast(d, func(x Dest) int64 { return int64(x.Active) + 1 })
}
