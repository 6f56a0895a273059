package ipvs

import "net/netip"

var _ ConnReader = (*Mem)(nil)

// SetConnCounts sets what the connection table shows for k, as the kernel's
// connections would; zero counts remove it.
func (m *Mem) SetConnCounts(k ConnKey, c ConnCounts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conns == nil {
		m.conns = map[ConnKey]ConnCounts{}
	}
	if c == (ConnCounts{}) {
		delete(m.conns, k)
		return
	}
	m.conns[k] = c
}

// ConnStates implements ConnReader from the counts SetConnCounts set.
func (m *Mem) ConnStates(want map[netip.AddrPort]struct{}) (map[ConnKey]ConnCounts, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.connReads++
	out := map[ConnKey]ConnCounts{}
	for k, c := range m.conns {
		if _, ok := want[k.Dest]; ok {
			out[k] = c
		}
	}
	return out, nil
}

// ConnReads reports how many times ConnStates was called: the monitor
// reads the connection table only for suspects.
func (m *Mem) ConnReads() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.connReads
}
