module lvs-feedback

go 1.26.8

require (
	github.com/BurntSushi/toml v1.6.0 // indirect
	github.com/google/renameio/v2 v2.0.2 // indirect
	github.com/moby/ipvs v1.1.0
	github.com/prometheus/procfs v0.23.0 // indirect
	github.com/sirupsen/logrus v1.9.0 // indirect
	github.com/vishvananda/netlink v1.3.1
	github.com/vishvananda/netns v0.0.5
	golang.org/x/sync v0.25.0 // indirect
	golang.org/x/sys v0.49.0
)
