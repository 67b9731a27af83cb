#!/usr/bin/env bash
# Local Jaeger v2 (all-in-one, in-memory storage) for Hookline dev and e2e
# tests, bound to 127.0.0.1 only. No Docker: bin/jaeger is built from source
# through the wrapper module build/jaeger (pinned jaeger version in its go.mod;
# first build ~5-8 min, later builds only when go.mod/go.sum change).
#
# Usage: scripts/jaeger.sh build|up|down|run|status|env
#   build   build bin/jaeger unless it is current (stamp: bin/jaeger.stamp)
#   up      build if needed, start a fresh jaeger in the background, wait until
#           the query API and the OTLP ports answer, print the endpoints
#   down    stop it (SIGTERM, then SIGKILL after a timeout); idempotent
#   run     build if needed and run jaeger in the foreground (make jaeger)
#   status  print whether it runs (exit 0 running, 1 not running)
#   env     print shell exports for the chosen ports
#
# Environment (all ports on 127.0.0.1):
#   HOOKLINE_JAEGER_OTLP_GRPC_PORT   OTLP gRPC receiver      (default 4317)
#   HOOKLINE_JAEGER_OTLP_HTTP_PORT   OTLP HTTP receiver      (default 4318)
#   HOOKLINE_JAEGER_QUERY_HTTP_PORT  query HTTP API + UI     (default 16686)
#   HOOKLINE_JAEGER_QUERY_GRPC_PORT  query gRPC API          (default 16685)
#   HOOKLINE_JAEGER_HEALTH_PORT      health check (/status)  (default 13133)
#   HOOKLINE_JAEGER_METRICS_PORT     jaeger's own /metrics   (default 8888)
#   HOOKLINE_JAEGER_DIR              pid/log dir of `up` (default ${TMPDIR:-/tmp}/hookline-jaeger)
#   HOOKLINE_JAEGER_WAIT             seconds `up` waits for readiness (default 60)
#   HOOKLINE_JAEGER_STOP_TIMEOUT     seconds `down` waits after SIGTERM (default 15)
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
ROOT="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"
MODDIR="$ROOT/build/jaeger"
CONFIG="$MODDIR/config.yaml"
BIN="$ROOT/bin/jaeger"
STAMP="$ROOT/bin/jaeger.stamp"

# Exported: config.yaml reads them as ${env:HOOKLINE_JAEGER_..._PORT:-default}.
export HOOKLINE_JAEGER_OTLP_GRPC_PORT="${HOOKLINE_JAEGER_OTLP_GRPC_PORT:-4317}"
export HOOKLINE_JAEGER_OTLP_HTTP_PORT="${HOOKLINE_JAEGER_OTLP_HTTP_PORT:-4318}"
export HOOKLINE_JAEGER_QUERY_HTTP_PORT="${HOOKLINE_JAEGER_QUERY_HTTP_PORT:-16686}"
export HOOKLINE_JAEGER_QUERY_GRPC_PORT="${HOOKLINE_JAEGER_QUERY_GRPC_PORT:-16685}"
export HOOKLINE_JAEGER_HEALTH_PORT="${HOOKLINE_JAEGER_HEALTH_PORT:-13133}"
export HOOKLINE_JAEGER_METRICS_PORT="${HOOKLINE_JAEGER_METRICS_PORT:-8888}"
PORTS=("$HOOKLINE_JAEGER_OTLP_GRPC_PORT" "$HOOKLINE_JAEGER_OTLP_HTTP_PORT"
       "$HOOKLINE_JAEGER_QUERY_HTTP_PORT" "$HOOKLINE_JAEGER_QUERY_GRPC_PORT"
       "$HOOKLINE_JAEGER_HEALTH_PORT" "$HOOKLINE_JAEGER_METRICS_PORT")

JDIR="${HOOKLINE_JAEGER_DIR:-${TMPDIR:-/tmp}/hookline-jaeger}"
case "$JDIR" in /*) ;; *) JDIR="$PWD/$JDIR" ;; esac
PIDFILE="$JDIR/jaeger.pid"
LOGFILE="$JDIR/jaeger.log"
WAIT_S="${HOOKLINE_JAEGER_WAIT:-60}"
STOP_S="${HOOKLINE_JAEGER_STOP_TIMEOUT:-15}"

QUERY_URL="http://127.0.0.1:$HOOKLINE_JAEGER_QUERY_HTTP_PORT"
OTLP_HTTP_URL="http://127.0.0.1:$HOOKLINE_JAEGER_OTLP_HTTP_PORT"
OTLP_GRPC_URL="http://127.0.0.1:$HOOKLINE_JAEGER_OTLP_GRPC_PORT"

SCRIPT_NAME=jaeger.sh
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

# ---------------------------------------------------------------- build

# The jaeger version pinned in build/jaeger/go.mod (for `jaeger version`).
jaeger_version() { awk '$1 == "github.com/jaegertracing/jaeger" {print $2; exit}' "$MODDIR/go.mod"; }

# What the binary is built from: go.mod + go.sum. config.yaml is read at run
# time, so editing it needs no rebuild.
src_hash() { cat "$MODDIR/go.mod" "$MODDIR/go.sum" | sha256sum | awk '{print $1}'; }

bin_current() { [ -x "$BIN" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(src_hash)" ]; }

cmd_build() {
  if bin_current; then log "bin/jaeger is up to date ($(jaeger_version))"; return 0; fi
  command -v go >/dev/null 2>&1 || die "go not found on PATH"
  mkdir -p "$ROOT/bin"
  exec 8>"$ROOT/bin/jaeger.lock"
  flock 8
  if bin_current; then exec 8>&-; return 0; fi   # another process just built it
  local v t0=$SECONDS
  v="$(jaeger_version)"
  log "building bin/jaeger (jaeger $v) from build/jaeger; a cold build takes several minutes ..."
  # GOWORK=off: build/jaeger is its own module, never part of the root go.work.
  (cd "$MODDIR" && GOWORK=off go build -trimpath \
     -ldflags "-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=$v" \
     -o "$BIN.tmp" github.com/jaegertracing/jaeger/cmd/jaeger) ||
    { rm -f "$BIN.tmp"; die "go build of jaeger failed"; }
  mv -f "$BIN.tmp" "$BIN"
  src_hash >"$STAMP"
  exec 8>&-
  log "built bin/jaeger in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------- processes

# The pid in $PIDFILE, if it is a live bin/jaeger started with our config.
our_pid() {
  local p cmd
  [ -f "$PIDFILE" ] || return 1
  p="$(cat "$PIDFILE" 2>/dev/null || true)"
  [[ "$p" =~ ^[0-9]+$ ]] && alive "$p" || return 1
  cmd="$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)" || return 1
  [[ "$cmd" == "$BIN "*"--config=$CONFIG"* ]] || return 1
  echo "$p"
}

cmd_down() {
  local pid deadline
  if ! pid="$(our_pid)"; then rm -f "$PIDFILE"; log "not running"; return 0; fi
  log "stopping jaeger (pid $pid) ..."
  kill -TERM "$pid" 2>/dev/null || true
  deadline=$((SECONDS + STOP_S))
  while alive "$pid" && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  if alive "$pid"; then
    log "pid $pid did not stop within ${STOP_S}s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    deadline=$((SECONDS + 10))
    while alive "$pid"; do [ $SECONDS -lt $deadline ] || die "pid $pid survived SIGKILL"; sleep 0.1; done
  fi
  rm -f "$PIDFILE"
  log "jaeger stopped"
}

check_ports_free() {
  local p
  for p in "${PORTS[@]}"; do
    if port_open "$p"; then
      die "port 127.0.0.1:$p is already in use (choose other HOOKLINE_JAEGER_*_PORT values; see 'scripts/jaeger.sh' usage)"
    fi
  done
}

print_endpoints() {
  cat <<EOF
jaeger: OTLP gRPC  $OTLP_GRPC_URL
jaeger: OTLP HTTP  $OTLP_HTTP_URL  (POST /v1/traces)
jaeger: query API  $QUERY_URL/api/traces?service=...  (UI is a placeholder page)
jaeger: health     http://127.0.0.1:$HOOKLINE_JAEGER_HEALTH_PORT/status
export OTEL_EXPORTER_OTLP_ENDPOINT=$OTLP_HTTP_URL OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf
EOF
}

cmd_up() {
  cmd_build
  if our_pid >/dev/null; then log "a jaeger from an earlier 'up' is running; restarting it"; cmd_down; fi
  check_ports_free
  mkdir -p "$JDIR"
  : >"$LOGFILE"
  local t0=$SECONDS
  nohup "$BIN" "--config=$CONFIG" </dev/null >"$LOGFILE" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  local deadline=$((t0 + WAIT_S))
  while :; do
    if ! alive "$pid"; then
      printf '\n----- last 40 lines of %s -----\n' "$LOGFILE" >&2; tail -n 40 "$LOGFILE" >&2
      rm -f "$PIDFILE"
      die "jaeger (pid $pid) exited during startup"
    fi
    if [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$QUERY_URL/api/services" 2>/dev/null)" = 200 ] &&
       port_open "$HOOKLINE_JAEGER_OTLP_GRPC_PORT" && port_open "$HOOKLINE_JAEGER_OTLP_HTTP_PORT"; then
      break
    fi
    if [ $SECONDS -ge $deadline ]; then
      printf '\n----- last 40 lines of %s -----\n' "$LOGFILE" >&2; tail -n 40 "$LOGFILE" >&2
      cmd_down
      die "jaeger did not become ready within ${WAIT_S}s"
    fi
    sleep 0.2
  done
  log "jaeger ready in $((SECONDS - t0))s (pid $pid, log $LOGFILE)"
  print_endpoints
}

cmd_run() {
  cmd_build
  check_ports_free
  print_endpoints
  exec "$BIN" "--config=$CONFIG"
}

cmd_status() {
  local pid
  if pid="$(our_pid)"; then echo "jaeger: running (pid $pid), query $QUERY_URL, log $LOGFILE"; return 0; fi
  echo "jaeger: not running"
  return 1
}

cmd_env() {
  local v
  for v in OTLP_GRPC OTLP_HTTP QUERY_HTTP QUERY_GRPC HEALTH METRICS; do
    v="HOOKLINE_JAEGER_${v}_PORT"
    echo "export $v=${!v}"
  done
  echo "export HOOKLINE_JAEGER_QUERY_URL=$QUERY_URL"
  echo "export OTEL_EXPORTER_OTLP_ENDPOINT=$OTLP_HTTP_URL"
  echo "export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf"
}

case "${1:-}" in
  build)  cmd_build ;;
  up)     cmd_up ;;
  down)   cmd_down ;;
  run)    cmd_run ;;
  status) cmd_status ;;
  env)    cmd_env ;;
  *)      sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
