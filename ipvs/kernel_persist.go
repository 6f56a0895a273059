//go:build linux

package ipvs

import (
	"fmt"
	"net/netip"
	"time"
)

var _ TemplateReader = (*Kernel)(nil)

// svcFlagPersistent is IP_VS_SVC_F_PERSISTENT: the service is persistent
// and its timeout is the persistence timeout.
const svcFlagPersistent = 0x1

// Persistence reads svc's persistence timeout (through moby/ipvs) and its
// destinations' template counts (a destination dump of Kernel's own); see
// TemplateReader.
func (k *Kernel) Persistence(svc ServiceKey) (Persistence, error) {
	op := fmt.Sprintf("read persistence of %s", svc)
	key, err := canonicalKey(svc)
	if err != nil {
		return Persistence{}, fmt.Errorf("%s: %w", op, err)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	h, err := k.handle()
	if err != nil {
		return Persistence{}, fmt.Errorf("%s: %w", op, err)
	}
	ms, err := h.GetService(mobyService(key))
	if err != nil {
		return Persistence{}, kernelErr(op, err)
	}
	out := Persistence{Templates: map[netip.AddrPort]int{}}
	if ms.Flags&svcFlagPersistent != 0 {
		out.Timeout = time.Duration(ms.Timeout) * time.Second
	}
	k.dumped, err = k.dumpDests(key, k.dumped)
	if err != nil {
		return Persistence{}, kernelErr(op, err)
	}
	for _, d := range k.dumped {
		// The kernel always sends the count: a missing one is not read
		// as no templates.
		if d.persistTemplates < 0 {
			return Persistence{}, fmt.Errorf("%s: destination %s without its persistent connection count", op, d.Addr)
		}
		out.Templates[d.Addr] = d.persistTemplates
	}
	return out, nil
}
