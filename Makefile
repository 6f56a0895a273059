# lvs-feedback — build, test and demo targets. `make help` lists them.
GO ?= go
BIN := bin

.PHONY: all build test demo test-kernel bench-kernel vet lint loadtest fuzz help

all: build

help:
	@echo "make build        build every command (lvs-monitor, lvs-agent, lvsctl, …) into ./bin"
	@echo "make test         gofmt, go vet, go mod tidy -diff, staticcheck, then go test -race ./... (what CI runs)"
	@echo "make demo         30 s live demo after the build (a first build adds a minute or more): one of three servers hogged, its weight falls and recovers"
	@echo "make test-kernel  boot a Debian kernel under qemu and run the IPVS tests on real IPVS"
	@echo "make bench-kernel time reads, weight writes and the monitor's cycle on real IPVS at 10,000 destinations (VM, about 4 min)"
	@echo "make bench-balance  simulate the shipped scenarios (sim/scenarios) and the held-out test family, print the balancing tables"
	@echo "make fuzz         run each fuzz target for FUZZTIME (default 20s)"
	@echo "make loadtest     2,000 real agents on loopback, polled every 2 s for 5 minutes"
	@echo "make install      install binaries, units, example config (PREFIX, DESTDIR)"
	@echo "make deb          build bin/lvs-monitor_*.deb (director) and bin/lvs-agent_*.deb (real server) with nfpm"
	@echo "make man          render the manual pages docs/man/*.[58] from their sources docs/man/*.md"
	@echo "make systemd-check  systemd-analyze verify and security exposure of both units"

build:
	$(GO) build -o $(BIN)/ ./cmd/...

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet:
	$(GO) vet ./...

# gofmt, go vet and staticcheck must all be clean.
lint: vet man-check
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }
	$(GO) run $(STATICCHECK) ./...

test: lint
	$(GO) test -race -count=1 ./...

# 30 s (after the build; a first build adds a minute or more) on any Linux
# machine, no IPVS or root needed: three local servers,
# three real lvs-agents, the real monitor on an in-memory IPVS table, real
# traffic; server 2 is hogged and its weight falls and recovers. Exit 0 when
# it did. See docs/demo.md.
demo: build
	./$(BIN)/lvs-demo -agent ./$(BIN)/lvs-agent

# Each fuzz target for FUZZTIME (default 20s): the agent-reply decoder, the
# config loader, the sync frame verifier, payload decoder and header check
# (what the listener reads before a frame authenticates), the pusher's
# parsing of hellos and acknowledgements, the node_exporter parser and the
# saved IPVS table reader (lvs-monitor -dry-run -table) and the history
# file reader. Seed corpora are
# committed under each package's testdata/fuzz and run by `make test`.
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeReport$$' -fuzztime $(FUZZTIME) ./agent/
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) ./monitor/
	$(GO) test -run '^$$' -fuzz '^FuzzVerify$$' -fuzztime $(FUZZTIME) ./scheduler/
	$(GO) test -run '^$$' -fuzz '^FuzzPayload$$' -fuzztime $(FUZZTIME) ./scheduler/
	$(GO) test -run '^$$' -fuzz '^FuzzVerifyHeader$$' -fuzztime $(FUZZTIME) ./scheduler/
	$(GO) test -run '^$$' -fuzz '^FuzzPusherReplies$$' -fuzztime $(FUZZTIME) ./scheduler/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./nodeexp/
	$(GO) test -run '^$$' -fuzz '^FuzzReadTable$$' -fuzztime $(FUZZTIME) ./ipvs/
	$(GO) test -run '^$$' -fuzz '^FuzzReadFile$$' -fuzztime $(FUZZTIME) ./history/

# 2,000 real agent endpoints on 127.1.0.0/16 polled every 2 s for 5 minutes
# (docs/developer/scale.md). Not part of `make test`: it takes 5 minutes.
loadtest:
	$(GO) run ./cmd/lvs-loadtest -n 2000 -interval 2s -duration 5m

# Boots a Debian cloud kernel under qemu (TCG) and runs the tests listed in
# vmtest/tests.list against real IPVS. VMTEST_LIST=path overrides the list;
# VMTEST_BUSY=1 runs it with every host core busy (one busy loop per core).
# See docs/developer/testing-kernel.md.
VMTEST_LIST ?=
test-kernel:
	GO=$(GO) ./vmtest/run.sh $(VMTEST_LIST)

# Benchmarks on real IPVS in the test VM at 10,000 destinations (100 services
# × 100 servers): the bare kernel work of a cycle (ipvs.BenchmarkKernel) and
# the monitor's cycle against it (monitor.BenchmarkKernelCycle), then a table
# of medians. The guest runs longer than the tests do, hence the limits.
# Not part of test-kernel. See docs/developer/scale.md "On real IPVS".
BENCH_VMTEST_TIMEOUT ?= 900
BENCH_VMTEST_TEST_TIMEOUT ?= 600
bench-kernel:
	GO=$(GO) VMTEST_TIMEOUT=$(BENCH_VMTEST_TIMEOUT) VMTEST_TEST_TIMEOUT=$(BENCH_VMTEST_TEST_TIMEOUT) ./vmtest/run.sh vmtest/bench.list
	@echo
	@./vmtest/bench-table.sh $${VMTEST_OUT:-vmtest/out}/console.log

# Balancing-quality benchmark (issue 7): every shipped scenario × 5 seeds ×
# kernel scheduler × policy (static baselines, the LVS formula, the default
# controller, the ideal-weights counterfactual, the references), with the
# real monitor in the loop. Prints the table; BENCH_FLAGS adds lvs-sim flags
# (e.g. BENCH_FLAGS="-plot docs/results -csv /tmp/bench.csv").
# Then the held-out generated family: scenarios test-00..BENCH_FAMILY-1,
# each with its own 2 seeds, and their summary (tune on -family train only).
# See docs/developer/simulator.md.
BENCH_FLAGS ?=
BENCH_FAMILY ?= 24
bench-balance:
	$(GO) run ./cmd/lvs-sim $(BENCH_FLAGS) -family test -generate $(BENCH_FAMILY) sim/scenarios/*.toml

# ---- install, package, systemd units (docs/operator-guide.md) ----------
# make install [PREFIX=/usr/local] [DESTDIR=]: both roles at once —
# binaries, systemd units (their paths rewritten to BINDIR and DOCDIR), the
# example configuration and the flag files of /etc/default (never over
# existing ones), the manual pages, the modules-load file that loads ip_vs,
# the docs and the licence. make deb: bin/lvs-monitor_$(VERSION)_amd64.deb
# (director) and bin/lvs-agent_$(VERSION)_amd64.deb (real server) with nfpm;
# VERSION is packaging/changelog's top entry. make systemd-check:
# systemd-analyze verify and security.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
DOCDIR ?= $(PREFIX)/share/doc/lvs-feedback
VERSION ?= $(shell awk 'NR == 1 { gsub(/[()]/, "", $$2); print $$2 }' packaging/changelog)
MANDIR ?= $(PREFIX)/share/man
MODULESLOADDIR ?= $(PREFIX)/lib/modules-load.d
INSTALL_CMDS := lvs-monitor lvs-agent lvsctl lvs-tune

.PHONY: install deb systemd-check man man-check

# Manual pages: each docs/man/PAGE.md is the one source of docs/man/PAGE
# (lvs-monitor.8, lvs-agent.8, lvsctl.8, lvs-monitor.toml.5), rendered to
# roff by go-md2man (github.com/cpuguy83/go-md2man, run through the Go
# module proxy at a pinned version). The roff is committed so that
# packaging needs no renderer; man-check (part of lint) fails when it is
# not what the source renders to. docs/man/man_test.go checks the pages
# against each binary's -h and the example configuration.
MD2MAN := github.com/cpuguy83/go-md2man/v2@v2.0.7
MAN_SOURCES := $(wildcard docs/man/*.md)

man:
	@for md in $(MAN_SOURCES); do GOFLAGS= $(GO) run $(MD2MAN) -in $$md -out $${md%.md} || exit 1; done

man-check:
	@tmp=$$(mktemp -d); trap 'rm -rf "$$tmp"' EXIT; status=0; \
	for md in $(MAN_SOURCES); do \
		page=$${md%.md}; GOFLAGS= $(GO) run $(MD2MAN) -in $$md -out $$tmp/out || exit 1; \
		cmp -s $$tmp/out $$page || { echo "$$page is not what $$md renders to: run make man"; status=1; }; \
	done; exit $$status

install:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(addprefix ./cmd/,$(INSTALL_CMDS))
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(UNITDIR) $(DESTDIR)$(SYSCONFDIR)/lvs-monitor $(DESTDIR)$(DOCDIR)/examples \
		$(DESTDIR)$(DOCDIR)/results $(DESTDIR)$(MANDIR)/man5 $(DESTDIR)$(MANDIR)/man8 $(DESTDIR)$(MODULESLOADDIR)
	install -m 0755 $(addprefix $(BIN)/,$(INSTALL_CMDS)) $(DESTDIR)$(BINDIR)/
	for u in lvs-monitor.service lvs-agent.service lvs-benefit.service lvs-benefit.timer; do \
		sed -e 's|/usr/bin/|$(BINDIR)/|g' -e 's|/etc/lvs-monitor/|$(SYSCONFDIR)/lvs-monitor/|g' \
			-e 's|/etc/default/|$(SYSCONFDIR)/default/|g' -e 's|/usr/lib/modules-load.d/|$(MODULESLOADDIR)/|g' \
			-e 's|file:///usr/share/doc/lvs-[a-z]*/\([a-z-]*\.md\)\.gz|file://$(DOCDIR)/\1|g' \
			systemd/$$u > $(DESTDIR)$(UNITDIR)/$$u && chmod 0644 $(DESTDIR)$(UNITDIR)/$$u; \
	done
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/lvs-monitor/lvs-monitor.toml ]; then \
		echo "kept $(DESTDIR)$(SYSCONFDIR)/lvs-monitor/lvs-monitor.toml (the example is in $(DOCDIR)/examples)"; \
	else \
		install -m 0644 docs/examples/lvs-monitor.toml $(DESTDIR)$(SYSCONFDIR)/lvs-monitor/lvs-monitor.toml; \
	fi
	@for f in lvs-monitor lvs-agent; do \
		[ -e $(DESTDIR)$(SYSCONFDIR)/default/$$f ] || install -D -m 0644 packaging/default/$$f $(DESTDIR)$(SYSCONFDIR)/default/$$f; \
	done
	install -m 0644 README.md LICENSE docs/*.md docs/grafana-dashboard.json $(DESTDIR)$(DOCDIR)/
	install -m 0644 docs/results/*.svg $(DESTDIR)$(DOCDIR)/results/
	install -m 0644 docs/man/*.5 $(DESTDIR)$(MANDIR)/man5/
	install -m 0644 docs/man/*.8 $(DESTDIR)$(MANDIR)/man8/
	install -m 0644 packaging/modules-load.d/lvs-monitor.conf $(DESTDIR)$(MODULESLOADDIR)/
	install -m 0644 docs/examples/lvs-monitor.toml docs/examples/lvs-monitor.rules.yml $(DESTDIR)$(DOCDIR)/examples/
	@echo "installed under $(DESTDIR)$(PREFIX); then: systemctl daemon-reload; systemctl enable --now lvs-monitor (directors) or lvs-agent (real servers)"

deb:
	GO=$(GO) VERSION=$(VERSION) ./packaging/deb.sh

systemd-check:
	GO=$(GO) ./systemd/check.sh
