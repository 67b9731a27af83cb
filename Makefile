# Hookline — every workflow is a make target; nothing needs installing by
# hand beyond Go, Java 17 with Maven, Python 3.11 and Node 20. Tools are
# pinned and installed into bin/tools on first use.

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

MODULES := gen platform sdk services/ingest services/dispatcher services/scheduler cmd/hookline e2e bench deploy
TOOLS   := $(CURDIR)/bin/tools
export PATH := $(TOOLS):$(PATH)

BUF_VERSION           := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12
PROTOC_GEN_GRPC_VER   := v1.6.2
GOLANGCI_VERSION      := v2.15.0
HELM_VERSION          := v3.22.0
GRPC_GATEWAY_VERSION  := v2.33.0

# The real-broker tier: Apache Kafka 4.4 started by scripts/kafka.sh.
REAL_KAFKA := 127.0.0.1:19092
# The same broker's TLS listener and the throwaway CA kafka.sh made for it.
REAL_KAFKA_TLS := 127.0.0.1:19094
REAL_KAFKA_TLS_CA := $(CURDIR)/build/kafka/run/tls/ca.pem
TEST_LOG   := bin/test-logs

.PHONY: help
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

## ---- tools -------------------------------------------------------------

$(TOOLS)/buf:
	GOBIN=$(TOOLS) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(TOOLS)/protoc-gen-go-grpc:
	GOBIN=$(TOOLS) go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GRPC_VER)
$(TOOLS)/golangci-lint:
	GOBIN=$(TOOLS) go install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
$(TOOLS)/protoc-gen-grpc-gateway:
	GOBIN=$(TOOLS) go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-grpc-gateway@$(GRPC_GATEWAY_VERSION)
$(TOOLS)/protoc-gen-openapiv2:
	GOBIN=$(TOOLS) go install github.com/grpc-ecosystem/grpc-gateway/v2/protoc-gen-openapiv2@$(GRPC_GATEWAY_VERSION)
# smokescreen: the egress proxy e2e's real CONNECT proxy (HOOKLINE_SMOKESCREEN).
SMOKESCREEN_VERSION   := v0.1.0
$(TOOLS)/smokescreen:
	GOBIN=$(TOOLS) go install github.com/stripe/smokescreen@$(SMOKESCREEN_VERSION)
# helm: helm lint in make lint, helm template in the chart's tests.
$(TOOLS)/helm:
	GOBIN=$(TOOLS) go install helm.sh/helm/v3/cmd/helm@$(HELM_VERSION)

.PHONY: tools
tools: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2 $(TOOLS)/golangci-lint $(TOOLS)/helm ## install the pinned tools into bin/tools

## ---- build and run -----------------------------------------------------

.PHONY: gen
gen: $(TOOLS)/buf $(TOOLS)/protoc-gen-go $(TOOLS)/protoc-gen-go-grpc $(TOOLS)/protoc-gen-grpc-gateway $(TOOLS)/protoc-gen-openapiv2 ## regenerate gen/ from proto/ (Go, gRPC, the HTTP/JSON gateway, gen/openapiv2/hookline.swagger.json)
	buf generate

.PHONY: gen-check
gen-check: gen ## fail when gen/ differs from what make gen writes
	@if [ -n "$$(git status --porcelain -- gen)" ]; then \
	  git status --porcelain -- gen; git diff --stat -- gen; \
	  echo "gen/ is stale: run 'make gen' and commit the result"; exit 1; fi

.PHONY: build
# Without cgo, as the images are built: Pebble's block cache and memtables
# are then Go memory, which GOMEMLIMIT bounds (with cgo they are malloc'd
# outside it), so what the benches measure is what ships.
build: ## build bin/hookline and the service binaries
	CGO_ENABLED=0 go build -o bin/hookline ./cmd/hookline
	CGO_ENABLED=0 go build -o bin/ingest ./services/ingest
	CGO_ENABLED=0 go build -o bin/dispatcher ./services/dispatcher
	CGO_ENABLED=0 go build -o bin/scheduler ./services/scheduler

# Container images (deploy/image): static linux binaries on an empty base
# with CA certificates, running as uid 65532, written as OCI layouts under
# bin/images/<name> without a Docker daemon. Labels carry the commit and
# IMAGE_VERSION; every file's time is the commit's, so the digests are
# reproducible. See docs/deploy.md.
IMAGE_ARCH     ?= $(shell go env GOARCH)
IMAGE_VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
IMAGE_REVISION := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
IMAGE_CREATED  := $(shell git log -1 --format=%cI 2>/dev/null || echo 1970-01-01T00:00:00Z)
IMAGE_BINS     := bin/images/linux-$(IMAGE_ARCH)

.PHONY: images
images: ## container images of ingest, dispatcher, scheduler and the CLI as OCI layouts in bin/images (no Docker needed)
	@mkdir -p $(IMAGE_BINS)
	@for b in ingest:./services/ingest dispatcher:./services/dispatcher scheduler:./services/scheduler hookline:./cmd/hookline; do \
	  IFS=: read -r name pkg <<<"$$b"; \
	  CGO_ENABLED=0 GOOS=linux GOARCH=$(IMAGE_ARCH) go build -trimpath -ldflags='-s -w -buildid=' -o $(IMAGE_BINS)/$$name $$pkg; done
	go run ./deploy/cmd/images --bin $(IMAGE_BINS) --out bin/images --arch $(IMAGE_ARCH) \
	  --version $(IMAGE_VERSION) --revision $(IMAGE_REVISION) --created $(IMAGE_CREATED)

.PHONY: run
run: build ## run all of Hookline on an embedded Kafka (hookline dev); flags with ARGS, e.g. make run ARGS='--console-addr 127.0.0.1:7081'
	./bin/hookline dev $(ARGS)

## ---- quality gates -----------------------------------------------------

.PHONY: lint
lint: $(TOOLS)/buf $(TOOLS)/golangci-lint $(TOOLS)/helm ## gofmt, go vet, golangci-lint (per module), buf lint, format and breaking, helm lint, the SDK from outside, each module tidy and built on its own with aligned versions
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	@for m in $(MODULES); do echo "vet + golangci-lint: $$m"; \
	  (cd $$m && go vet ./... && golangci-lint run --allow-parallel-runners --config $(CURDIR)/.golangci.yml ./...); done
	buf lint
	buf format -d --exit-code
	helm lint --strict deploy/helm/hookline
	@$(MAKE) --no-print-directory buf-breaking
	@bash scripts/sdk-scratch.sh
	@bash scripts/modules-check.sh $(MODULES)

# The protos of the commit scripts/breaking-base.sh names (the last v* tag,
# else the merge base with main, else HEAD's parent), extracted with git
# archive: works offline, detached, in worktrees and in a fresh clone.
.PHONY: buf-breaking
buf-breaking: $(TOOLS)/buf ## buf breaking: fail on an API change that breaks published clients
	@base=$$(bash scripts/breaking-base.sh); \
	  if [ -z "$$base" ]; then echo "buf breaking: no earlier commit to compare with; skipped"; exit 0; fi; \
	  dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
	  git archive "$$base" -- buf.yaml proto $$(git ls-tree -d --name-only "$$base" third_party) | tar -x -C "$$dir"; \
	  echo "buf breaking: proto/ against $$(git log -1 --format='%h (%cs)' "$$base")"; \
	  buf breaking proto --against "$$dir/proto"

## ---- tests -------------------------------------------------------------

.PHONY: test
test: gen-check lint test-unit test-deploy test-fuzz sim test-real test-crash test-jaeger test-clients test-receivers ## everything CI runs: gen check, lint, unit + kfake tier, images, fuzz smoke, the fault simulation (default seeds), real Kafka tier, crash run, traces in Jaeger, clients in other languages, Standard Webhooks interop

# Node.js verifies v1a (ed25519) signatures independently of Hookline's
# Go code (sdk/sign/signtest); those tests skip without it.
.PHONY: node
node: ## Node.js for the independent ed25519 signature check, installed with apt-get when missing
	@command -v node >/dev/null || { apt-get update -qq && apt-get install -y -qq nodejs; }

# The delivery console's browser test (services/ingest) drives Debian's
# Chromium headless; it is installed here when missing, and required.
.PHONY: chromium
chromium: ## install Debian's chromium for the console's browser test, when missing
	@command -v chromium >/dev/null || { echo "installing chromium (apt)"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium chromium-driver; }; }

.PHONY: test-unit
test-unit: $(TOOLS)/helm $(TOOLS)/smokescreen node chromium ## unit tests and the integration suite on kfake, with -race (the chart's tests run helm template; the console's Chromium test writes bin/console-timeline.png)
	@mkdir -p $(TEST_LOG)
	@for m in $(MODULES); do echo "go test -race: $$m (kafka: kfake)"; \
	  (cd $$m && HOOKLINE_TEST_KAFKA=kfake HOOKLINE_REQUIRE_CHROMIUM=1 HOOKLINE_SMOKESCREEN=$(TOOLS)/smokescreen go test -race -count=1 -timeout 30m ./...); done
	@echo "go test: e2e virtual-time tests (testing/synctest; without -race, see e2e/virtual_test.go)"
	@cd e2e && HOOKLINE_TEST_KAFKA=kfake go test -count=1 -timeout 30m ./...

# The seeded fault simulation (e2e/sim_*_test.go; docs/reliability.md
# "Simulation"): SEEDS is a count (seeds 1..n) or a comma-separated list,
# DURATION each seed's fault phase, TRAIL_SLOWEST=n logs where the n
# deliveries that ended last went (a seed that passed slowly). Prints the
# table (also written to bin/sim/results.md) and fails on any violation,
# naming the rerun.
SEEDS    ?=
DURATION ?=
TRAIL_SLOWEST ?=
.PHONY: sim
sim: ## seeded fault simulation of ingest, dispatchers and the scheduler on kfake (SEEDS=n or a list, DURATION=12s); table in bin/sim/results.md
	@mkdir -p bin/sim && rm -f bin/sim/results.md
	@rc=0; cd e2e && HOOKLINE_SIM=1 HOOKLINE_TEST_KAFKA=kfake HOOKLINE_SIM_SEEDS='$(SEEDS)' HOOKLINE_SIM_DURATION='$(DURATION)' HOOKLINE_SIM_TRAIL_SLOWEST='$(TRAIL_SLOWEST)' \
	  go test -count=1 -timeout 60m -run '^TestSim$$' . > $(CURDIR)/bin/sim/last.log 2>&1 || rc=$$?; \
	  cat $(CURDIR)/bin/sim/results.md 2>/dev/null || tail -40 $(CURDIR)/bin/sim/last.log; \
	  grep -h -B1 '^ *rerun: make sim SEEDS=' $(CURDIR)/bin/sim/last.log | grep -v '^--$$' | cut -c1-3000 || true; \
	  echo "full log: bin/sim/last.log"; exit $$rc

# A longer search than make test's default seeds (about 40 minutes here).
.PHONY: sim-search
sim-search: ## the fault simulation over seeds 1..40 with a 20 s fault phase each (a longer search than make sim)
	$(MAKE) sim SEEDS=1..40 DURATION=20s

.PHONY: test-deploy
test-deploy: images ## make images, then read every image it wrote (config, filesystem) and run its binary with -h
	cd deploy && HOOKLINE_TEST_IMAGES=$(CURDIR)/bin/images go test -count=1 -run '^TestImageLayouts$$' -v ./image

.PHONY: test-real
test-real: node ## the integration suite on Apache Kafka 4.4 (started and stopped here)
	@mkdir -p $(TEST_LOG)
	@rc=0; bash scripts/kafka.sh up || { bash scripts/kafka.sh down; exit 1; }; \
	  (cd e2e && HOOKLINE_TEST_KAFKA=$(REAL_KAFKA) HOOKLINE_TEST_KAFKA_TLS=$(REAL_KAFKA_TLS) HOOKLINE_TEST_KAFKA_TLS_CA=$(REAL_KAFKA_TLS_CA) go test -race -count=1 -timeout 30m -v ./...) > $(TEST_LOG)/real-kafka.log 2>&1 || rc=$$?; \
	  bash scripts/kafka.sh down; \
	  grep -E '^(--- |ok|FAIL)' $(TEST_LOG)/real-kafka.log || true; \
	  echo "real Kafka 4.4 tier: $$(grep -cE '^ *--- PASS' $(TEST_LOG)/real-kafka.log) tests passed, $$(grep -cE '^ *--- FAIL' $(TEST_LOG)/real-kafka.log) failed (log: $(TEST_LOG)/real-kafka.log)"; \
	  if [ $$rc -ne 0 ]; then tail -n 80 $(TEST_LOG)/real-kafka.log; fi; \
	  exit $$rc

# Fuzz targets for every parser and decoder that takes outside bytes, as
# <module dir>:<package>:<target>. Their corpora are committed under each
# package's testdata/fuzz/<target>/ and replayed by plain go test too.
FUZZ_TARGETS := \
  services/dispatcher:./retryafter:FuzzParse \
  services/dispatcher:./retryafter:FuzzParseDeltaSeconds \
  services/dispatcher:./retryafter:FuzzParseHTTPDate \
  services/dispatcher:./dispatcher:FuzzPoisonDelivery \
  services/ingest:./ingest:FuzzValidateURL \
  services/ingest:./ingest:FuzzInlinePayload \
  sdk:./sign:FuzzVerifyNeverPanics \
  sdk:./sign:FuzzSignVerifyRoundTrip \
  sdk:./sign:FuzzParseSecret \
  platform:./keyring:FuzzParse \
  platform:./celfilter:FuzzCompileAndMatch \
  platform:./netguard:FuzzControl \
  platform:./netguard:FuzzCheckIPv4Forms \
  platform:./netguard:FuzzCheckHost \
  platform:./netguard:FuzzEmbeddedForms \
  platform:./filter:FuzzMatch \
  platform:./kafka:FuzzDecodeRecords
FUZZTIME ?= 10s
# make test's smoke runs a count, not a duration: with a duration, Go
# 1.26's fuzz coordinator can report "context deadline exceeded" as the
# time ends while a worker is mid-call (golang/go#75804, fixed in Go
# 1.27), and the smoke failed a clean-clone run so with no input found.
# 20,000 executions take 1-6 s per target here.
FUZZ_SMOKE_TIME := 20000x

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 10s; e.g. make fuzz FUZZTIME=5m)
	@for t in $(FUZZ_TARGETS); do IFS=: read -r mod pkg name <<<"$$t"; \
	  echo "fuzz $$mod $$pkg $$name ($(FUZZTIME))"; \
	  (cd $$mod && go test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg) || exit 1; done

.PHONY: test-fuzz
test-fuzz: ## every fuzz target for 20,000 executions each (part of make test)
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SMOKE_TIME)

# The Standard Webhooks libraries for Python and Node, pinned in
# e2e/testdata/standardwebhooks/ and installed here, not globally.
RX_INTEROP     := $(CURDIR)/bin/rx-interop
RX_INTEROP_SRC := e2e/testdata/standardwebhooks

$(RX_INTEROP)/venv/.installed: $(RX_INTEROP_SRC)/requirements.txt
	rm -rf $(RX_INTEROP)/venv && python3 -m venv $(RX_INTEROP)/venv
	$(RX_INTEROP)/venv/bin/pip install --quiet --disable-pip-version-check -r $<
	touch $@

$(RX_INTEROP)/.npm-installed: $(RX_INTEROP_SRC)/package.json $(RX_INTEROP_SRC)/package-lock.json
	mkdir -p $(RX_INTEROP) && cp $^ $(RX_INTEROP)/
	cd $(RX_INTEROP) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: test-receivers
test-receivers: node $(RX_INTEROP)/venv/.installed $(RX_INTEROP)/.npm-installed ## the Standard Webhooks libraries (Python, Node) and sdk/receiver verify a real Hookline delivery and a batch (reading back its member ids)
	cd e2e && HOOKLINE_TEST_KAFKA=kfake HOOKLINE_RX_PYTHON=$(RX_INTEROP)/venv/bin/python HOOKLINE_RX_NODE_MODULES=$(RX_INTEROP)/node_modules \
	  go test -count=1 -run '^(TestStandardWebhooksLibrariesVerify(HooklineSignatures|ABatchAndListItsMembers)|TestBatchedDeliveryRetriesTheSameBatchVerifiedByTheStandardWebhooksLibraries)$$' -v . | grep -E '^\s*(--- |ok|FAIL|PASS)|verified='

# Ports of the Jaeger test-jaeger starts, away from a developer's own.
JAEGER_TEST_ENV := HOOKLINE_JAEGER_OTLP_GRPC_PORT=24317 HOOKLINE_JAEGER_OTLP_HTTP_PORT=24318 \
  HOOKLINE_JAEGER_QUERY_HTTP_PORT=26686 HOOKLINE_JAEGER_QUERY_GRPC_PORT=26685 \
  HOOKLINE_JAEGER_HEALTH_PORT=23133 HOOKLINE_JAEGER_METRICS_PORT=28888 \
  HOOKLINE_JAEGER_DIR=$(CURDIR)/bin/jaeger-test

.PHONY: test-jaeger
test-jaeger: ## a delivery exported over OTLP to a real Jaeger v2, found by event id through its query API
	@mkdir -p $(TEST_LOG)
	@rc=0; $(JAEGER_TEST_ENV) bash scripts/jaeger.sh up || { $(JAEGER_TEST_ENV) bash scripts/jaeger.sh down; exit 1; }; \
	  (cd e2e && HOOKLINE_TEST_KAFKA=kfake HOOKLINE_TEST_JAEGER=http://127.0.0.1:26686 \
	    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:24318 OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf \
	    go test -count=1 -timeout 5m -run '^TestTraceFoundInJaeger$$' -v .) > $(TEST_LOG)/jaeger.log 2>&1 || rc=$$?; \
	  $(JAEGER_TEST_ENV) bash scripts/jaeger.sh down; \
	  grep -E '^(--- |ok|FAIL)|found trace' $(TEST_LOG)/jaeger.log || true; \
	  if [ $$rc -ne 0 ]; then tail -n 60 $(TEST_LOG)/jaeger.log; fi; \
	  exit $$rc

## ---- clients in other languages ------------------------------------------

# Python, Node and Java clients generated from proto/ with each ecosystem's
# own pinned generator, and their examples (clients/README.md). Nothing
# generated is committed: the Python venv and code live in bin/clients/python,
# Node loads proto/ at run time (@grpc/proto-loader), Maven writes
# clients/java/target. Package caches (~/.cache/pip, ~/.npm, ~/.m2) are the
# user's.
CLIENTS_PY := $(CURDIR)/bin/clients/python

.PHONY: clients
clients: clients-python clients-node clients-java ## generate the Python, Node and Java clients from proto/ and install what their examples need

$(CLIENTS_PY)/venv/.installed: clients/python/requirements.txt
	rm -rf $(CLIENTS_PY)/venv
	python3 -m venv $(CLIENTS_PY)/venv
	$(CLIENTS_PY)/venv/bin/pip install -q --disable-pip-version-check --only-binary=:all: -r clients/python/requirements.txt
	touch $@

.PHONY: clients-python
clients-python: $(CLIENTS_PY)/venv/.installed ## the Python client (grpcio-tools) in bin/clients/python
	rm -rf $(CLIENTS_PY)/gen && mkdir -p $(CLIENTS_PY)/gen
	$(CLIENTS_PY)/venv/bin/python -m grpc_tools.protoc -I proto -I third_party/googleapis -I third_party/protovalidate --python_out=$(CLIENTS_PY)/gen \
	  --pyi_out=$(CLIENTS_PY)/gen --grpc_python_out=$(CLIENTS_PY)/gen $$(find proto third_party/googleapis third_party/protovalidate -name '*.proto' | sort)
	$(CLIENTS_PY)/venv/bin/python -c 'import site,sys; open(site.getsitepackages()[0]+"/hookline-gen.pth","w").write(sys.argv[1]+"\n")' $(CLIENTS_PY)/gen

.PHONY: clients-node
clients-node: ## the Node client's packages (npm ci); it loads proto/ at run time
	cd clients/node && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error

.PHONY: clients-java
clients-java: ## the Java client (protobuf-maven-plugin, grpc-java) in clients/java/target
	@# (the sed drops the bare colour resets Debian's Maven prints even in batch mode)
	cd clients/java && mvn -B -q compile 2>&1 | sed -e 's/\x1b\[[0-9;]*m//g'

.PHONY: test-clients
test-clients: build clients ## the Python, Node and Java clients and results consumers against a live hookline dev (part of make test)
	@mkdir -p $(TEST_LOG)
	@rc=0; (cd e2e && HOOKLINE_TEST_CLIENTS=python,node,java go test -count=1 -timeout 15m -run '^TestPolyglotClients$$' -v .) \
	    > $(TEST_LOG)/clients.log 2>&1 || rc=$$?; \
	  grep -E '^(python|node|java) (client|consumer): ' $(TEST_LOG)/clients.log || true; \
	  if [ $$rc -ne 0 ]; then tail -n 80 $(TEST_LOG)/clients.log; echo "clients: FAIL (log: $(TEST_LOG)/clients.log)"; fi; \
	  exit $$rc

## ---- chaos -------------------------------------------------------------

# The crash suite (bench/chaos/): bin/ingest, bin/dispatcher and bin/scheduler,
# two of each, as separate processes on chaos's own Apache Kafka 4.4
# (ports 19500-19502 for one node, 19510-19518 for three; data under
# /tmp/hookline-chaos-kafka*), steady load through gRPC to healthy, slow,
# 50%-503, dead and hanging loopback receivers, kill -9 of services and
# brokers, then the ledger check. Table in bin/chaos-logs/; how to read it in
# docs/reliability.md. CHAOS_FLAGS adds flags, e.g. CHAOS_FLAGS='--load 90s'
# or CHAOS_FLAGS='--scenarios kill-broker'; bin/chaos -h lists them.
CHAOS_FLAGS ?=
CHAOS_NODES ?= 3

.PHONY: chaos-bin
chaos-bin: build
	go build -o bin/chaos ./bench/chaos

.PHONY: chaos
chaos: chaos-bin ## crash suite on a 3-broker Kafka 4.4 (CHAOS_NODES=1 for one): kill -9 and SIGSTOP of every service kind, partitions and slow links to the brokers, leader bounces, broker and coordinator kills, a seeded storm (--seed), under load with ordered lanes; reconcile; table in bin/chaos-logs/results.md
	bin/chaos --nodes $(CHAOS_NODES) --out bin/chaos-logs/results.md $(CHAOS_FLAGS)

.PHONY: test-crash
# The settle is a bound, not a wait: a row ends as soon as every accepted
# delivery has ended. 180 s, not 90 s: after the broker kill the ordered
# lanes drain through the retry path (a 503 head retries 1 s later, its
# followers wait on --park-recheck, up to 5 s a round), and on a loaded
# 2-core machine their last member ended 78 s after its publish
# (docs/reliability.md, "The 204 unfinished ordered deliveries").
test-crash: chaos-bin ## the short crash run of make test: one broker; kill -9 a dispatcher, an ingest, then the broker under load; a rolling upgrade of every process; ledger check
	bin/chaos --nodes 1 --scenarios quick,rolling-upgrade --load 40s --settle 180s --out bin/chaos-logs/quick.md

## ---- tracing -----------------------------------------------------------

.PHONY: jaeger
jaeger: ## run Jaeger v2 on loopback in the foreground (OTLP 127.0.0.1:4317/4318, query API http://127.0.0.1:16686)
	bash scripts/jaeger.sh run

.PHONY: jaeger-up
jaeger-up: ## start that Jaeger in the background
	bash scripts/jaeger.sh up

.PHONY: jaeger-down
jaeger-down: ## stop it
	bash scripts/jaeger.sh down

## ---- Kafka -------------------------------------------------------------

.PHONY: kafka-up
kafka-up: ## start a local Apache Kafka 4.4 (KRaft, 127.0.0.1:19092)
	bash scripts/kafka.sh up

.PHONY: kafka-down
kafka-down: ## stop it
	bash scripts/kafka.sh down

## ---- benchmarks --------------------------------------------------------

# The load harness (bench/loadbench): it runs the binaries make build writes
# as subprocesses and prints one markdown table, also written to
# $(BENCH_OUT). Its own Apache Kafka (real mode and the scheduler scenario)
# runs on ports 19392-19394, away from the test broker's. BENCH_FLAGS adds
# loadbench flags, e.g. BENCH_FLAGS='--quick' (smoke run) or
# BENCH_FLAGS='--scenarios ceiling,lifted'; bin/loadbench -h lists them.
BENCH_OUT   := bin/bench/results.md
BENCH_FLAGS ?=
KAFKA       ?= embedded

.PHONY: bench-bins
bench-bins: build
	go build -o bin/loadbench ./bench/loadbench
	go build -o bin/schedbench ./bench/schedbench
	go build -o bin/historybench ./bench/historybench

# The delivery history bench (bench/historybench): 1,000,000 deliveries of
# 2 KB written straight to its own Apache Kafka 4.4 (ports 19396-19398),
# indexed by bin/ingest; RSS, GetDelivery and ListDeliveries p99, restart
# to SERVING. HISTORY_BENCH_FLAGS adds flags, e.g. '--deliveries 100000'.
HISTORY_BENCH_OUT   := bin/bench/history.md
HISTORY_BENCH_FLAGS ?=

.PHONY: bench
bench: bench-bins ## load harness on hookline dev (KAFKA=real for Apache Kafka 4.4) + scheduler bench + delivery history at 1M deliveries; tables in bin/bench/
	bin/loadbench --kafka $(KAFKA) --out $(BENCH_OUT) $(BENCH_FLAGS)
	$(MAKE) --no-print-directory bench-history

.PHONY: bench-history
bench-history: bench-bins ## the delivery history bench alone (1M deliveries; table in bin/bench/history.md)
	bin/historybench --out $(HISTORY_BENCH_OUT) $(HISTORY_BENCH_FLAGS)

.PHONY: bench-real
bench-real: bench-bins ## the same harness on Apache Kafka 4.4 with ingest, dispatcher and scheduler as separate processes
	bin/loadbench --kafka real --out $(BENCH_OUT) $(BENCH_FLAGS)
