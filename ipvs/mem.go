package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// Mem is an in-memory IPVS table for tests, the demo and the simulator. It
// implements Admin with the same checks and errors as Kernel, and adds
// methods that play the kernel's part: counting connections and setting
// connection gauges.
//
// Services and destinations are listed in insertion order. (The kernel lists
// services in hash order and new destinations first; callers must not rely on
// either order.) Mem is safe for concurrent use; the zero value is not usable,
// call NewMem.
type Mem struct {
	mu    sync.Mutex
	order []ServiceKey
	svcs  map[ServiceKey]*memService
	// conns is the connection table's counts (SetConnCounts), connReads
	// how many times ConnStates read them.
	conns     map[ConnKey]ConnCounts
	connReads int
}

type memService struct {
	scheduler string
	dests     []Destination // insertion order
	// persist is each destination's persistence templates
	// (SetPersistConns); a destination without an entry has none.
	persist        map[netip.AddrPort]int
	persistTimeout time.Duration // SetPersistTimeout
}

// NewMem returns an empty in-memory table.
func NewMem() *Mem {
	return &Mem{svcs: make(map[ServiceKey]*memService)}
}

var _ Admin = (*Mem)(nil)

// Services lists the virtual services in insertion order.
func (m *Mem) Services() ([]Service, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Service, 0, len(m.order))
	for _, k := range m.order {
		out = append(out, Service{Key: k, Scheduler: m.svcs[k].scheduler})
	}
	return out, nil
}

// Destinations lists svc's real servers in insertion order.
func (m *Mem) Destinations(svc ServiceKey) ([]Destination, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, _, err := m.service(svc)
	if err != nil {
		return nil, fmt.Errorf("list destinations of %s: %w", svc, err)
	}
	return append([]Destination(nil), s.dests...), nil
}

// SetWeight sets dst's weight to to if it is still from (compare-and-set);
// see Table. It is SetWeights with one change.
func (m *Mem) SetWeight(svc ServiceKey, dst netip.AddrPort, from, to int) error {
	return m.SetWeights(svc, []WeightChange{{Dest: dst, From: from, To: to}})[0]
}

// SetWeights applies compare-and-set weight writes to svc's destinations
// under one lock; see Table.
func (m *Mem) SetWeights(svc ServiceKey, changes []WeightChange) []error {
	errs := make([]error, len(changes))
	if len(changes) == 0 {
		return errs
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, k, svcErr := m.service(svc)
	// An index pays for itself only over several lookups; one change
	// (SetWeight) scans the list.
	var at map[netip.AddrPort]int
	if svcErr == nil && len(changes) > 1 {
		at = make(map[netip.AddrPort]int, len(s.dests))
		for i, d := range s.dests {
			at[d.Addr] = i
		}
	}
	for i, c := range changes {
		if err := m.setWeightLocked(s, k, svcErr, at, c); err != nil {
			errs[i] = fmt.Errorf("set weight of %s in %s: %w", c.Dest, svc, err)
		}
	}
	return errs
}

// setWeightLocked applies one change to s (svcErr: why s was not found;
// at: an index of s.dests or nil); the caller holds m.mu.
func (m *Mem) setWeightLocked(s *memService, k ServiceKey, svcErr error, at map[netip.AddrPort]int, c WeightChange) error {
	if err := checkWeight(c.To); err != nil {
		return err
	}
	if svcErr != nil {
		return svcErr
	}
	a, err := canonicalDest(k, c.Dest)
	if err != nil {
		return err
	}
	var i int
	var ok bool
	if at != nil {
		i, ok = at[a]
	} else {
		i = slices.IndexFunc(s.dests, func(d Destination) bool { return d.Addr == a })
		ok = i >= 0
	}
	if !ok {
		return fmt.Errorf("destination not in the table: %w", ErrNotFound)
	}
	d := &s.dests[i]
	if d.Weight != c.From {
		return fmt.Errorf("table holds weight %d, not %d: %w", d.Weight, c.From, ErrWeightChanged)
	}
	d.Weight = c.To
	return nil
}

// AddService adds an empty virtual service. The scheduler name is not
// checked beyond being non-empty (the kernel refuses unknown ones). Adding a
// service twice returns an error wrapping ErrExist.
func (m *Mem) AddService(svc ServiceKey, scheduler string) error {
	op := fmt.Sprintf("add service %s", svc)
	k, err := canonicalKey(svc)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if scheduler == "" {
		return fmt.Errorf("%s: no scheduler given", op)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.svcs[k]; ok {
		return fmt.Errorf("%s: %w", op, ErrExist)
	}
	m.svcs[k] = &memService{scheduler: scheduler}
	m.order = append(m.order, k)
	return nil
}

// RemoveService removes a service and its destinations.
func (m *Mem) RemoveService(svc ServiceKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, k, err := m.service(svc)
	if err != nil {
		return fmt.Errorf("remove service %s: %w", svc, err)
	}
	delete(m.svcs, k)
	for i, o := range m.order {
		if o == k {
			m.order = append(m.order[:i], m.order[i+1:]...)
			break
		}
	}
	return nil
}

// AddDestination adds a real server with the given weight. A destination
// already in the service returns an error wrapping ErrExist.
func (m *Mem) AddDestination(svc ServiceKey, dst netip.AddrPort, weight int) error {
	op := fmt.Sprintf("add destination %s to %s", dst, svc)
	if err := checkWeight(weight); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, k, err := m.service(svc)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	d, err := canonicalDest(k, dst)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	for _, e := range s.dests {
		if e.Addr == d {
			return fmt.Errorf("%s: %w", op, ErrExist)
		}
	}
	s.dests = append(s.dests, Destination{Addr: d, Weight: weight})
	return nil
}

// RemoveDestination removes a real server from a service.
func (m *Mem) RemoveDestination(svc ServiceKey, dst netip.AddrPort) error {
	op := fmt.Sprintf("remove destination %s from %s", dst, svc)
	m.mu.Lock()
	defer m.mu.Unlock()
	s, k, err := m.service(svc)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	d, err := canonicalDest(k, dst)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	for i, e := range s.dests {
		if e.Addr == d {
			s.dests = append(s.dests[:i], s.dests[i+1:]...)
			delete(s.persist, d)
			return nil
		}
	}
	return fmt.Errorf("%s: destination not in the table: %w", op, ErrNotFound)
}

// RecordConnection counts one new connection scheduled to dst, as the
// kernel does when it picks a destination. It changes only the cumulative
// Connections counter; use SetActive for the connection gauges.
func (m *Mem) RecordConnection(svc ServiceKey, dst netip.AddrPort) error {
	return m.AddConnections(svc, dst, 1)
}

// AddConnections adds n to dst's cumulative Connections counter, which wraps
// at 2^32 like the kernel's.
func (m *Mem) AddConnections(svc ServiceKey, dst netip.AddrPort, n uint32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dest(svc, dst)
	if err != nil {
		return fmt.Errorf("count connections of %s in %s: %w", dst, svc, err)
	}
	d.Connections += n // wraps, like the kernel's 32-bit counter
	return nil
}

// SetActive sets dst's active and inactive connection counts.
func (m *Mem) SetActive(svc ServiceKey, dst netip.AddrPort, active, inactive int) error {
	op := fmt.Sprintf("set connection counts of %s in %s", dst, svc)
	if active < 0 || inactive < 0 {
		return fmt.Errorf("%s: negative count (%d active, %d inactive)", op, active, inactive)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dest(svc, dst)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	d.ActiveConns, d.InactiveConns = active, inactive
	return nil
}

// SetPersistConns sets how many persistence templates point at dst, as a
// persistent service's clients would make the kernel keep.
func (m *Mem) SetPersistConns(svc ServiceKey, dst netip.AddrPort, n int) error {
	op := fmt.Sprintf("set persistence templates of %s in %s", dst, svc)
	if n < 0 {
		return fmt.Errorf("%s: negative count %d", op, n)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dest(svc, dst)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s, _, _ := m.service(svc) // found: m.dest found it
	if s.persist == nil {
		s.persist = map[netip.AddrPort]int{}
	}
	s.persist[d.Addr] = n
	return nil
}

// SetPersistTimeout sets svc's persistence timeout, as ipvsadm -p would
// (0: not persistent).
func (m *Mem) SetPersistTimeout(svc ServiceKey, d time.Duration) error {
	op := fmt.Sprintf("set persistence timeout of %s", svc)
	if d < 0 {
		return fmt.Errorf("%s: negative timeout %v", op, d)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	s, _, err := m.service(svc)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	s.persistTimeout = d
	return nil
}

var _ TemplateReader = (*Mem)(nil)

// Persistence implements TemplateReader from what SetPersistTimeout and
// SetPersistConns set.
func (m *Mem) Persistence(svc ServiceKey) (Persistence, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, _, err := m.service(svc)
	if err != nil {
		return Persistence{}, fmt.Errorf("read persistence of %s: %w", svc, err)
	}
	out := Persistence{Timeout: s.persistTimeout, Templates: make(map[netip.AddrPort]int, len(s.dests))}
	for _, d := range s.dests {
		out.Templates[d.Addr] = s.persist[d.Addr]
	}
	return out, nil
}

// Weight returns dst's current weight.
func (m *Mem) Weight(svc ServiceKey, dst netip.AddrPort) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.dest(svc, dst)
	if err != nil {
		return 0, fmt.Errorf("read weight of %s in %s: %w", dst, svc, err)
	}
	return d.Weight, nil
}

// service finds svc; the caller holds m.mu. It also returns the canonical key.
func (m *Mem) service(svc ServiceKey) (*memService, ServiceKey, error) {
	k, err := canonicalKey(svc)
	if err != nil {
		return nil, ServiceKey{}, err
	}
	s, ok := m.svcs[k]
	if !ok {
		return nil, k, fmt.Errorf("service not in the table: %w", ErrNotFound)
	}
	return s, k, nil
}

// dest finds dst in svc; the caller holds m.mu. The pointer is valid until
// the service's destinations change.
func (m *Mem) dest(svc ServiceKey, dst netip.AddrPort) (*Destination, error) {
	s, k, err := m.service(svc)
	if err != nil {
		return nil, err
	}
	d, err := canonicalDest(k, dst)
	if err != nil {
		return nil, err
	}
	for i := range s.dests {
		if s.dests[i].Addr == d {
			return &s.dests[i], nil
		}
	}
	return nil, fmt.Errorf("destination not in the table: %w", ErrNotFound)
}
