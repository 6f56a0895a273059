package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Role is what the director's environment says it is: Active when it holds
// the service's virtual IP (or is configured active), Standby otherwise.
// Whether it actually writes weights is the Node's decision (split brain).
type Role int

// The roles.
const (
	Standby Role = iota
	Active
)

func (r Role) String() string {
	if r == Active {
		return "active"
	}
	return "standby"
}

// RoleSource tells the director its role. Changes delivers every change of
// Role (a slow reader may miss intermediate values, never the latest one).
type RoleSource interface {
	Role() Role
	Changes() <-chan Role
}

// FixedRole is a role set in the configuration. It never changes.
type FixedRole struct {
	r  Role
	ch chan Role
}

// NewFixedRole returns a RoleSource that always says r.
func NewFixedRole(r Role) *FixedRole { return &FixedRole{r: r, ch: make(chan Role)} }

// Role returns the configured role.
func (f *FixedRole) Role() Role { return f.r }

// Changes returns a channel that never delivers.
func (f *FixedRole) Changes() <-chan Role { return f.ch }

// VIPWatcherConfig configures a VIPWatcher.
type VIPWatcherConfig struct {
	// VIPs are the virtual IPs; the director is active while any of them
	// is on one of its interfaces.
	VIPs []netip.Addr
	// NetNS is the network namespace to watch (nil: the caller's). The
	// caller keeps it open while the watcher runs.
	NetNS *netns.NsHandle
	// Resync re-lists the addresses this often, in case an event was lost
	// (default 30 s).
	Resync time.Duration
	// RetryMax bounds the wait between failed subscription attempts
	// (default 5 s; the first retry comes after 100 ms).
	RetryMax time.Duration
	Logger   *slog.Logger
}

// VIPWatcher follows the virtual IPs through a netlink address
// subscription: keepalived (or anything else) adds a VIP when this director
// becomes the VRRP master and removes it when it stops being one.
type VIPWatcher struct {
	cfg     VIPWatcherConfig
	log     *slog.Logger
	vips    map[netip.Addr]bool
	changes chan Role
	ready   chan struct{}
	kickCh  chan struct{} // tests: end the current subscription
	gapHook func()        // tests: runs between two subscriptions

	mu      sync.Mutex
	role    Role
	present map[netip.Addr]map[int]bool // VIP → link indexes holding it
	isReady bool
}

// NewVIPWatcher returns a watcher; call Run to start it. Until the first
// listing, Role says Standby and Ready is not closed.
func NewVIPWatcher(cfg VIPWatcherConfig) (*VIPWatcher, error) {
	if len(cfg.VIPs) == 0 {
		return nil, errors.New("scheduler: VIP watcher needs at least one virtual IP")
	}
	if cfg.Resync <= 0 {
		cfg.Resync = 30 * time.Second
	}
	if cfg.RetryMax <= 0 {
		cfg.RetryMax = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &VIPWatcher{
		cfg: cfg, log: log, vips: map[netip.Addr]bool{},
		changes: make(chan Role, 1), ready: make(chan struct{}), kickCh: make(chan struct{}, 1),
		present: map[netip.Addr]map[int]bool{},
	}
	for _, a := range cfg.VIPs {
		if !a.IsValid() {
			return nil, errors.New("scheduler: invalid virtual IP")
		}
		w.vips[a.Unmap()] = true
	}
	return w, nil
}

// Role returns the current role.
func (w *VIPWatcher) Role() Role {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.role
}

// Changes delivers role changes; it holds only the latest.
func (w *VIPWatcher) Changes() <-chan Role { return w.changes }

// Ready is closed once the addresses have been listed for the first time.
func (w *VIPWatcher) Ready() <-chan struct{} { return w.ready }

// Present returns the VIPs currently on a local interface, sorted.
func (w *VIPWatcher) Present() []netip.Addr {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]netip.Addr, 0, len(w.present))
	for a := range w.present {
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}

// kick ends the current subscription, as a receive error would (tests).
func (w *VIPWatcher) kick() {
	select {
	case w.kickCh <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends. A subscription that ends (its channel closes
// on any receive error) is replaced, and the addresses are listed again so
// that nothing missed in between is lost. While re-subscribing the role
// stays as it was.
func (w *VIPWatcher) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		ok := w.watch(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if w.gapHook != nil {
			w.gapHook()
		}
		if ok {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		if !ok {
			backoff = min(2*backoff, w.cfg.RetryMax)
		}
	}
}

// watch runs one subscription. It returns true if the subscription worked
// (and then ended), false if it could not be set up.
func (w *VIPWatcher) watch(ctx context.Context) bool {
	updates := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	var stopping sync.Once
	stop := func() { stopping.Do(func() { close(done) }) }
	var quiet sync.Mutex // guards ended: no error log once we stop on purpose
	ended := false
	opts := netlink.AddrSubscribeOptions{
		Namespace:    w.cfg.NetNS,
		ListExisting: true,
		ErrorCallback: func(err error) {
			quiet.Lock()
			defer quiet.Unlock()
			if !ended {
				w.log.Warn("VIP watcher: netlink address subscription error", "error", err)
			}
		},
	}
	if err := netlink.AddrSubscribeWithOptions(updates, done, opts); err != nil {
		stop()
		w.log.Warn("VIP watcher: cannot subscribe to address changes; retrying", "error", err)
		return false
	}
	finish := func() {
		quiet.Lock()
		ended = true
		quiet.Unlock()
		stop()
		// The library's reader blocks on the channel: drain it until it
		// closes so that its goroutine ends.
		for range updates {
		}
	}
	// The subscription is live: list the addresses, so that a removal
	// missed while there was no subscription is seen.
	if err := w.relist(); err != nil {
		finish()
		w.log.Warn("VIP watcher: cannot list addresses; retrying", "error", err)
		return false
	}
	resync := time.NewTicker(w.cfg.Resync)
	defer resync.Stop()
	for {
		select {
		case <-ctx.Done():
			finish()
			return true
		case <-w.kickCh:
			finish()
			return true
		case u, ok := <-updates:
			if !ok {
				finish()
				w.log.Warn("VIP watcher: address subscription ended; re-subscribing")
				return true
			}
			w.apply(u)
		case <-resync.C:
			if err := w.relist(); err != nil {
				w.log.Warn("VIP watcher: periodic address listing failed", "error", err)
			}
		}
	}
}

// relist replaces the known VIP placement with a fresh listing.
func (w *VIPWatcher) relist() error {
	var h *netlink.Handle
	var err error
	// Ask for the route family only: without it the library opens every
	// family it knows, and a kernel without one (XFRM, say) fails the whole
	// handle with "protocol not supported" (seen in the qemu guest).
	if w.cfg.NetNS != nil {
		h, err = netlink.NewHandleAt(*w.cfg.NetNS, unix.NETLINK_ROUTE)
	} else {
		h, err = netlink.NewHandle(unix.NETLINK_ROUTE)
	}
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	addrs, err := h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses: %w", err)
	}
	present := map[netip.Addr]map[int]bool{}
	for _, a := range addrs {
		if ip, ok := w.match(a.IPNet); ok {
			if present[ip] == nil {
				present[ip] = map[int]bool{}
			}
			present[ip][a.LinkIndex] = true
		}
	}
	w.mu.Lock()
	w.present = present
	w.mu.Unlock()
	w.update()
	return nil
}

func (w *VIPWatcher) match(n *net.IPNet) (netip.Addr, bool) {
	if n == nil {
		return netip.Addr{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Addr{}, false
	}
	a = a.Unmap()
	return a, w.vips[a]
}

// apply records one address event.
func (w *VIPWatcher) apply(u netlink.AddrUpdate) {
	ip, ok := w.match(&u.LinkAddress)
	if !ok {
		return
	}
	w.mu.Lock()
	if u.NewAddr {
		if w.present[ip] == nil {
			w.present[ip] = map[int]bool{}
		}
		w.present[ip][u.LinkIndex] = true
	} else if links := w.present[ip]; links != nil {
		delete(links, u.LinkIndex)
		if len(links) == 0 {
			delete(w.present, ip)
		}
	}
	w.mu.Unlock()
	w.update()
}

// update recomputes the role and announces a change.
func (w *VIPWatcher) update() {
	w.mu.Lock()
	r := Standby
	if len(w.present) > 0 {
		r = Active
	}
	changed := r != w.role
	w.role = r
	first := !w.isReady
	w.isReady = true
	var held []string
	for a := range w.present {
		held = append(held, a.String())
	}
	w.mu.Unlock()
	if first {
		close(w.ready)
		w.log.Info("VIP watcher: initial role", "role", r, "vips_present", held)
	}
	if !changed {
		return
	}
	if !first {
		w.log.Info("VIP watcher: role changed", "role", r, "vips_present", held)
	}
	// Keep only the latest value in the one-slot channel.
	for {
		select {
		case w.changes <- r:
			return
		default:
		}
		select {
		case <-w.changes:
		default:
		}
	}
}

var (
	_ RoleSource = (*FixedRole)(nil)
	_ RoleSource = (*VIPWatcher)(nil)
)
