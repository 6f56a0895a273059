# lvs-feedback — build, test and demo targets. `make help` lists them.
GO ?= go
BIN := bin

.PHONY: all build test demo test-kernel vet lint loadtest help

all: build

help:
	@echo "make build        build lvs-monitor and lvs-agent into ./bin"
	@echo "make test         gofmt, go vet, staticcheck, then go test -race ./... (what CI runs)"
	@echo "make demo         30 s live demo: three agents, one hogged, weights fall and recover"
	@echo "make test-kernel  boot a Debian kernel under qemu and run the IPVS tests on real IPVS"

build:
	$(GO) build -o $(BIN)/ ./cmd/...

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

vet:
	$(GO) vet ./...

# gofmt, go vet and staticcheck must all be clean.
lint: vet
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) run $(STATICCHECK) ./...

test: lint
	$(GO) test -race -count=1 ./...

# 2,000 real agent endpoints on 127.1.0.0/16 polled every 2 s for 5 minutes
# (docs/scale.md). Not part of `make test`: it takes 5 minutes.
loadtest:
	$(GO) run ./cmd/lvs-loadtest -n 2000 -interval 2s -duration 5m

# Boots a Debian cloud kernel under qemu (TCG) and runs the tests listed in
# vmtest/tests.list against real IPVS. VMTEST_LIST=path overrides the list.
# See docs/testing-kernel.md.
VMTEST_LIST ?=
test-kernel:
	GO=$(GO) ./vmtest/run.sh $(VMTEST_LIST)
