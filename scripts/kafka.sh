#!/usr/bin/env bash
# Pinned single-node Apache Kafka 4.4.0 broker (KRaft, combined broker+controller)
# for Hookline's integration tests. No Docker, no tarball download: the broker
# jars come from Maven Central through build/kafka/pom.xml and are cached in
# build/kafka/lib/ (git-ignored; re-resolved only when pom.xml changes).
#
# Usage: scripts/kafka.sh up|down|status|env
#   up      resolve jars if needed, start a fresh broker, wait until it answers
#           a metadata request, print the bootstrap address
#   down    stop the broker (SIGTERM, then SIGKILL after a timeout); idempotent
#   status  print whether it runs (exit 0 running, 1 not running)
#   env     print HOOKLINE_TEST_KAFKA=<bootstrap>, and the TLS listener's
#           address and CA (HOOKLINE_TEST_KAFKA_TLS, HOOKLINE_TEST_KAFKA_TLS_CA)
#
# Environment:
#   HOOKLINE_KAFKA_DIR              data/log/pid dir (default build/kafka/run);
#                                   wiped on every `up`
#   HOOKLINE_KAFKA_PORT             PLAINTEXT port on 127.0.0.1 (default 19092)
#   HOOKLINE_KAFKA_CONTROLLER_PORT  CONTROLLER port on 127.0.0.1 (default 19093)
#   HOOKLINE_KAFKA_TLS_PORT         SSL port on 127.0.0.1 (default 19094); its
#                                   certificate is made on every `up` by a
#                                   throwaway CA in <dir>/tls/ca.pem
#   HOOKLINE_KAFKA_WAIT             seconds `up` waits for readiness (default 90)
#   HOOKLINE_KAFKA_STOP_TIMEOUT     seconds `down` waits after SIGTERM (default 30)
#   HOOKLINE_KAFKA_HEAP             broker heap flags (default "-Xms256m -Xmx768m")
#   HOOKLINE_KAFKA_NODES            1 (default) or 3. With 3, `up` starts a
#                                   3-broker KRaft cluster (every node broker and
#                                   controller, static voters) on 127.0.0.1:
#                                   node i listens on PORT+3(i-1) (PLAINTEXT) and
#                                   PORT+3(i-1)+1 (CONTROLLER); no TLS listener.
#                                   Topics default to replication factor 3 and
#                                   min.insync.replicas=2, the internal topics too.
#                                   `up` prints the three bootstrap addresses.
#                                   Extra verbs for chaos tests:
#                                     kill N    kill -9 node N (1-3; one node: N ignored)
#                                     start N   start node N again on its data and
#                                               wait until the cluster lists all 3
#                                               brokers (N=0: every stopped node;
#                                               one node: wait until it serves)
set -euo pipefail

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
ROOT="$(cd -- "$SCRIPT_DIR/.." && pwd -P)"
KBUILD="$ROOT/build/kafka"
LIB="$KBUILD/lib"
STAMP="$LIB/.stamp"
POM="$KBUILD/pom.xml"
LOG4J2="$KBUILD/log4j2.properties"

KDIR="${HOOKLINE_KAFKA_DIR:-$KBUILD/run}"
case "$KDIR" in /*) ;; *) KDIR="$PWD/$KDIR" ;; esac
PORT="${HOOKLINE_KAFKA_PORT:-19092}"
CPORT="${HOOKLINE_KAFKA_CONTROLLER_PORT:-19093}"
TLSPORT="${HOOKLINE_KAFKA_TLS_PORT:-19094}"
WAIT_S="${HOOKLINE_KAFKA_WAIT:-90}"
STOP_S="${HOOKLINE_KAFKA_STOP_TIMEOUT:-30}"
HEAP="${HOOKLINE_KAFKA_HEAP:--Xms256m -Xmx768m}"
NODES="${HOOKLINE_KAFKA_NODES:-1}"
BOOTSTRAP="127.0.0.1:$PORT"

TLSDIR="$KDIR/tls"
PIDFILE="$KDIR/kafka.pid"
PROPS="$KDIR/server.properties"
LOGDIR="$KDIR/logs"
MARKER="$KDIR/.hookline-kafka"
# Fixed cluster id (base64url of the 16 bytes "HooklineTestKfka"); every `up`
# formats fresh storage, so a constant id is fine and saves a JVM start.
CLUSTER_ID="SG9va2xpbmVUZXN0S2ZrYQ"

SCRIPT_NAME=kafka.sh
# shellcheck source=scripts/lib.sh
. "$SCRIPT_DIR/lib.sh"

# ---------------------------------------------------------------- prerequisites

require_java() {
  command -v java >/dev/null 2>&1 ||
    die "java not found on PATH. Kafka 4.4 needs a Java 17+ runtime: install one (e.g. 'apt-get install -y openjdk-17-jre-headless') and retry."
  local v major
  v="$(java -version 2>&1 | awk -F'"' '/version/ {print $2; exit}')"
  major="${v%%.*}"
  [ "$major" = "1" ] && major="$(printf '%s' "$v" | cut -d. -f2)"
  if ! [ "$major" -ge 17 ] 2>/dev/null; then
    die "java '$v' is too old: Kafka 4.4 needs Java 17+ (e.g. 'apt-get install -y openjdk-17-jre-headless')."
  fi
}

pom_hash() { sha256sum "$POM" | awk '{print $1}'; }

lib_complete() {
  [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$(pom_hash)" ] &&
    compgen -G "$LIB/kafka_2.13-*.jar" >/dev/null
}

# Resolve build/kafka/pom.xml into lib/, unless lib/ already holds a complete
# resolution of this exact pom (then Maven is not run at all).
resolve_jars() {
  if lib_complete; then return 0; fi
  command -v mvn >/dev/null 2>&1 ||
    die "mvn not found on PATH, and $LIB is missing or stale. Install Maven (e.g. 'apt-get install -y maven'); it downloads the Kafka jars from Maven Central once."
  exec 8>"$KBUILD/.resolve.lock"
  flock 8
  if lib_complete; then exec 8>&-; return 0; fi   # another process just did it
  local tmp="$KBUILD/lib.tmp" t0=$SECONDS
  rm -rf "$tmp"
  log "resolving Kafka jars with Maven into $LIB (first run only) ..."
  local mvnlog="$KBUILD/resolve.log"
  if ! mvn -B -Dstyle.color=never -f "$POM" \
       "-Dkafka.lib.dir=$tmp" dependency:copy-dependencies@kafka-lib >"$mvnlog" 2>&1; then
    tail -n 40 "$mvnlog" >&2
    rm -rf "$tmp"
    die "Maven failed to resolve $POM (is Maven Central reachable? full log: $mvnlog)"
  fi
  compgen -G "$tmp/kafka_2.13-*.jar" >/dev/null || die "Maven ran but $tmp has no kafka_2.13 jar"
  pom_hash >"$tmp/.stamp"
  rm -rf "$LIB"
  mv "$tmp" "$LIB"
  exec 8>&-
  log "resolved $(find "$LIB" -name '*.jar' | wc -l) jars in $((SECONDS - t0))s"
}

# ---------------------------------------------------------------- processes

# True if $1 is a broker started by this script for this $KDIR.
is_our_broker() {
  local cmd
  alive "$1" || return 1
  cmd="$(tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null)" || return 1
  [[ "$cmd" == *kafka.Kafka* && "$cmd" == *"$PROPS"* ]]
}

# PIDs of brokers of this $KDIR: the pid file, plus any process whose command
# line names this exact server.properties (covers a lost/stale pid file).
broker_pids() {
  local pids=() p f
  if [ -f "$PIDFILE" ]; then
    p="$(cat "$PIDFILE" 2>/dev/null || true)"
    if [[ "$p" =~ ^[0-9]+$ ]] && is_our_broker "$p"; then pids+=("$p"); fi
  fi
  for f in /proc/[0-9]*/cmdline; do
    p="${f#/proc/}"; p="${p%/cmdline}"
    [[ " ${pids[*]-} " == *" $p "* ]] && continue
    if is_our_broker "$p"; then pids+=("$p"); fi
  done 2>/dev/null
  [ "${#pids[@]}" -gt 0 ] && printf '%s\n' "${pids[@]}"
  return 0
}

stop_broker() {
  local pids p deadline
  mapfile -t pids < <(broker_pids)
  if [ "${#pids[@]}" -eq 0 ]; then
    rm -f "$PIDFILE"
    return 0
  fi
  log "stopping broker (pid ${pids[*]}) ..."
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  deadline=$((SECONDS + STOP_S))
  while [ $SECONDS -lt $deadline ]; do
    local left=0
    for p in "${pids[@]}"; do if alive "$p"; then left=1; fi; done
    [ $left -eq 0 ] && break
    sleep 0.2
  done
  for p in "${pids[@]}"; do
    if alive "$p"; then
      log "broker pid $p did not stop within ${STOP_S}s; sending SIGKILL"
      kill -KILL "$p" 2>/dev/null || true
    fi
  done
  deadline=$((SECONDS + 10))
  for p in "${pids[@]}"; do
    while alive "$p"; do
      [ $SECONDS -lt $deadline ] || die "broker pid $p survived SIGKILL"
      sleep 0.1
    done
  done
  rm -f "$PIDFILE"
  log "broker stopped"
}

# Send a real Kafka Metadata request (v4, all topics) to 127.0.0.1:$1 with bash
# only, and succeed iff the answer carries our correlation id and lists broker 1
# at 127.0.0.1:$1, i.e. the broker is registered, unfenced and serving metadata.
# (A JVM-based AdminClient check would add ~3 s per probe on a 2-core machine.)
metadata_probe() {
  local port="$1" raw b
  # size=19 | api_key=3 (Metadata) | api_version=4 | correlation_id=7 |
  # client_id="hook" | topics=null (-1: all) | allow_auto_topic_creation=false
  raw="$( { exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
            printf '\x00\x00\x00\x13\x00\x03\x00\x04\x00\x00\x00\x07\x00\x04hook\xff\xff\xff\xff\x00' >&3
            timeout 5 head -c 35 <&3 | od -An -v -tu1; } 2>/dev/null )" || return 1
  read -r -a b <<<"$(printf '%s' "$raw" | tr -s ' \n' '  ')"
  # response: size(4) correlation_id(4) throttle_time_ms(4) brokers: count(4)
  #           node_id(4) host(int16 len + bytes) port(4) ...
  [ "${#b[@]}" -ge 35 ] || return 1
  be32() { echo $(( (b[$1] << 24) | (b[$1+1] << 16) | (b[$1+2] << 8) | b[$1+3] )); }
  [ "$(be32 4)" -eq 7 ] && [ "$(be32 12)" -ge 1 ] && [ "$(be32 16)" -eq 1 ] || return 1
  local hlen=$(( (b[20] << 8) | b[21] ))
  [ "$hlen" -eq 9 ] && [ "$(be32 $((22 + hlen)))" -eq "$port" ]
}

# ---------------------------------------------------------------- broker setup

# Wipe $KDIR, refusing to delete a folder this script did not create.
fresh_dir() {
  if [ -e "$KDIR" ]; then
    if [ ! -f "$MARKER" ] && [ -n "$(ls -A "$KDIR" 2>/dev/null)" ]; then
      die "$KDIR exists, is not empty and was not created by kafka.sh; refusing to wipe it (choose another HOOKLINE_KAFKA_DIR)"
    fi
    rm -rf "$KDIR"
  fi
  mkdir -p "$KDIR/data" "$LOGDIR"
  : >"$MARKER"
}

# A throwaway CA and a server certificate for 127.0.0.1, so the suite can
# check Hookline's TLS settings against a real TLS listener. Kafka reads
# the PEM key and chain directly (ssl.keystore.type=PEM).
make_tls() {
  command -v openssl >/dev/null 2>&1 || die "openssl not found on PATH: it makes the test broker's TLS certificate"
  mkdir -p "$TLSDIR"
  (
    cd "$TLSDIR"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=Hookline test CA" -keyout ca.key -out ca.pem
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
      -subj "/CN=127.0.0.1" -keyout server.key -out server.csr
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >server.ext
    openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
      -extfile server.ext -out server.crt
    openssl pkcs8 -topk8 -nocrypt -in server.key -out server.pk8
    cat server.pk8 server.crt ca.pem >keystore.pem
  ) >"$LOGDIR/tls.out" 2>&1 || { cat "$LOGDIR/tls.out" >&2; die "making the test TLS certificate failed"; }
}

write_config() {
  cat >"$PROPS" <<EOF
# Generated by scripts/kafka.sh: single-node KRaft broker for integration tests.
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$PORT,CONTROLLER://127.0.0.1:$CPORT,SSL://127.0.0.1:$TLSPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$PORT,SSL://127.0.0.1:$TLSPORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SSL:SSL
ssl.keystore.type=PEM
ssl.keystore.location=$TLSDIR/keystore.pem
ssl.client.auth=none
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$KDIR/data

# One node: every internal topic has RF 1 / min ISR 1, few partitions.
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
share.coordinator.state.topic.num.partitions=5

# Tests should not wait for rebalances; services create their own topics.
group.initial.rebalance.delay.ms=0
num.partitions=3
auto.create.topics.enable=false
delete.topic.enable=true
num.network.threads=2
num.io.threads=4
num.recovery.threads.per.data.dir=1

# Apply retention every second (default 5 min), so a test topic with a tiny
# retention.ms/segment.ms is emptied while the test waits.
log.retention.check.interval.ms=1000
EOF
}

# Run a Kafka CLI class from lib/ (quiet: logs go to $LOGDIR/tools.log).
kafka_tool() {
  java -Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 \
    "-Dlog4j2.configurationFile=$LOG4J2" "-Dkafka.logs.dir=$LOGDIR" -Dhookline.log.name=tools \
    -cp "$LIB/*" "$@"
}

show_logs() {
  if [ -s "$LOGDIR/server.log" ]; then
    printf '\n----- last 60 lines of %s -----\n' "$LOGDIR/server.log" >&2
    tail -n 60 "$LOGDIR/server.log" >&2
  fi
  if [ -s "$LOGDIR/kafka.out" ]; then
    printf '\n----- last 20 lines of %s (stdout/stderr) -----\n' "$LOGDIR/kafka.out" >&2
    tail -n 20 "$LOGDIR/kafka.out" >&2
  fi
  if [ ! -s "$LOGDIR/server.log" ] && [ ! -s "$LOGDIR/kafka.out" ]; then
    printf '(the broker has written no log output yet: %s)\n' "$LOGDIR" >&2
  fi
  printf -- '-----\n' >&2
}

cmd_up() {
  require_java
  resolve_jars
  stop_broker                          # a broker left over from an earlier run
  for p in "$PORT" "$CPORT" "$TLSPORT"; do
    if port_open "$p"; then die "port 127.0.0.1:$p is already in use by another process (set HOOKLINE_KAFKA_PORT / HOOKLINE_KAFKA_CONTROLLER_PORT / HOOKLINE_KAFKA_TLS_PORT)"; fi
  done
  fresh_dir
  make_tls
  write_config

  local t0=$SECONDS
  if ! kafka_tool kafka.tools.StorageTool format --standalone -t "$CLUSTER_ID" -c "$PROPS" \
       >"$LOGDIR/format.out" 2>&1; then
    cat "$LOGDIR/format.out" >&2
    die "formatting the KRaft storage failed"
  fi

  # shellcheck disable=SC2086 # HEAP holds several JVM flags
  nohup java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$LOG4J2" "-Dkafka.logs.dir=$LOGDIR" -Dhookline.log.name=server \
    -cp "$LIB/*" kafka.Kafka "$PROPS" \
    </dev/null >"$LOGDIR/kafka.out" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDFILE"

  # Ready = the process lives, the log says the server started, and a Metadata
  # request on the PLAINTEXT listener is answered with this broker in it.
  local deadline=$((t0 + WAIT_S))
  while :; do
    if ! alive "$pid"; then
      show_logs
      rm -f "$PIDFILE"
      die "broker process $pid exited during startup"
    fi
    if grep -q 'Kafka Server started' "$LOGDIR/server.log" 2>/dev/null && metadata_probe "$PORT"; then
      break
    fi
    if [ $SECONDS -ge $deadline ]; then
      show_logs
      stop_broker
      die "broker did not become ready within ${WAIT_S}s"
    fi
    sleep 0.25
  done
  log "broker ready in $((SECONDS - t0))s (pid $pid, logs $LOGDIR)"
  echo "$BOOTSTRAP"
}

cmd_status() {
  local pids
  mapfile -t pids < <(broker_pids)
  if [ "${#pids[@]}" -gt 0 ]; then
    echo "kafka: running (pid ${pids[*]}) on $BOOTSTRAP, dir $KDIR"
    return 0
  fi
  echo "kafka: not running"
  return 1
}

# ---------------------------------------------------------------- 3-node cluster

# Node i's ports, directory and files. Sets NODE_* and points PROPS and
# PIDFILE (used by broker_pids / stop_broker) at node i.
node_vars() {
  local i="$1"
  NODE_PORT=$((PORT + 3 * (i - 1)))
  NODE_CPORT=$((NODE_PORT + 1))
  NODE_DIR="$KDIR/node$i"
  NODE_LOGDIR="$NODE_DIR/logs"
  PROPS="$NODE_DIR/server.properties"
  PIDFILE="$NODE_DIR/kafka.pid"
}

cluster_bootstrap() {
  local i out=()
  for i in 1 2 3; do node_vars "$i"; out+=("127.0.0.1:$NODE_PORT"); done
  (IFS=,; echo "${out[*]}")
}

cluster_voters() {
  local i out=()
  for i in 1 2 3; do node_vars "$i"; out+=("$i@127.0.0.1:$NODE_CPORT"); done
  (IFS=,; echo "${out[*]}")
}

write_node_config() {
  local voters
  voters="$(cluster_voters)"
  node_vars "$1"
  mkdir -p "$NODE_DIR/data" "$NODE_LOGDIR"
  cat >"$PROPS" <<EOF
# Generated by scripts/kafka.sh: node $1 of a 3-node KRaft cluster for chaos tests.
process.roles=broker,controller
node.id=$1
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$NODE_PORT,CONTROLLER://127.0.0.1:$NODE_CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$NODE_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$NODE_DIR/data

# Three nodes: every topic, internal ones too, has RF 3 and needs 2 in sync
# for an acks=all write, so one broker may die without losing a write.
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=5
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=5
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
share.coordinator.state.topic.num.partitions=5
unclean.leader.election.enable=false

group.initial.rebalance.delay.ms=0
num.partitions=3
auto.create.topics.enable=false
delete.topic.enable=true
num.network.threads=2
num.io.threads=2
num.recovery.threads.per.data.dir=1
log.retention.check.interval.ms=1000
EOF
}

# A Metadata request to 127.0.0.1:$1 that succeeds iff the answer lists
# $2 brokers (registered and unfenced).
cluster_probe() {
  local port="$1" want="$2" raw b
  raw="$( { exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
            printf '\x00\x00\x00\x13\x00\x03\x00\x04\x00\x00\x00\x07\x00\x04hook\xff\xff\xff\xff\x00' >&3
            timeout 5 head -c 16 <&3 | od -An -v -tu1; } 2>/dev/null )" || return 1
  read -r -a b <<<"$(printf '%s' "$raw" | tr -s ' \n' '  ')"
  [ "${#b[@]}" -ge 16 ] || return 1
  be32() { echo $(( (b[$1] << 24) | (b[$1+1] << 16) | (b[$1+2] << 8) | b[$1+3] )); }
  [ "$(be32 4)" -eq 7 ] && [ "$(be32 12)" -eq "$want" ]
}

start_node() {
  node_vars "$1"
  if [ -n "$(broker_pids)" ]; then return 0; fi   # already running
  # shellcheck disable=SC2086 # HEAP holds several JVM flags
  nohup java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$LOG4J2" "-Dkafka.logs.dir=$NODE_LOGDIR" -Dhookline.log.name=server \
    -cp "$LIB/*" kafka.Kafka "$PROPS" \
    </dev/null >>"$NODE_LOGDIR/kafka.out" 2>&1 &
  echo "$!" >"$PIDFILE"
}

# Wait until every node in "$@" answers a Metadata request listing all
# three brokers.
wait_nodes() {
  local deadline=$((SECONDS + WAIT_S)) i pid pending
  while :; do
    pending=()
    for i in "$@"; do
      node_vars "$i"
      pid="$(cat "$PIDFILE" 2>/dev/null || true)"
      if ! alive "$pid"; then
        tail -n 40 "$NODE_LOGDIR/server.log" >&2 || true
        die "broker node $i (pid $pid) exited during startup (logs $NODE_LOGDIR)"
      fi
      cluster_probe "$NODE_PORT" 3 || pending+=("$i")
    done
    [ "${#pending[@]}" -eq 0 ] && return 0
    if [ $SECONDS -ge $deadline ]; then
      for i in "${pending[@]}"; do node_vars "$i"; tail -n 30 "$NODE_LOGDIR/server.log" >&2 || true; done
      die "broker node(s) ${pending[*]} not ready within ${WAIT_S}s"
    fi
    sleep 0.5
  done
}

cluster_down() {
  local i
  for i in 1 2 3; do node_vars "$i"; stop_broker; done
}

cluster_up() {
  require_java
  resolve_jars
  cluster_down
  local i p t0=$SECONDS
  for i in 1 2 3; do
    node_vars "$i"
    for p in "$NODE_PORT" "$NODE_CPORT"; do
      if port_open "$p"; then die "port 127.0.0.1:$p is already in use by another process (set HOOKLINE_KAFKA_PORT)"; fi
    done
  done
  fresh_dir
  for i in 1 2 3; do
    write_node_config "$i"
    if ! kafka_tool kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$PROPS" \
         >"$NODE_LOGDIR/format.out" 2>&1; then
      cat "$NODE_LOGDIR/format.out" >&2
      die "formatting node $i's KRaft storage failed"
    fi
  done
  for i in 1 2 3; do start_node "$i"; done
  if ! (wait_nodes 1 2 3); then cluster_down; exit 1; fi
  log "3-node cluster ready in $((SECONDS - t0))s (dir $KDIR)"
  cluster_bootstrap
}

cluster_kill() {
  local p deadline
  node_vars "$1"
  for p in $(broker_pids); do kill -KILL "$p" 2>/dev/null || true; done
  deadline=$((SECONDS + 10))
  while [ -n "$(broker_pids)" ]; do
    [ $SECONDS -lt $deadline ] || die "node $1 survived SIGKILL"
    sleep 0.1
  done
  rm -f "$PIDFILE"
  log "node $1 killed (kill -9)"
}

cluster_start() {
  local which=("$1") i
  [ "$1" = 0 ] && which=(1 2 3)
  for i in "${which[@]}"; do start_node "$i"; done
  wait_nodes "${which[@]}"
  log "node(s) ${which[*]} back; the cluster lists 3 brokers"
}

# kill -9 the one-node broker (chaos tests); `start` brings it back on
# its data, without formatting, and waits until it serves.
cmd_kill() {
  local p deadline
  for p in $(broker_pids); do kill -KILL "$p" 2>/dev/null || true; done
  deadline=$((SECONDS + 10))
  while [ -n "$(broker_pids)" ]; do
    [ $SECONDS -lt $deadline ] || die "broker survived SIGKILL"
    sleep 0.1
  done
  rm -f "$PIDFILE"
  log "broker killed (kill -9)"
}

cmd_start() {
  [ -f "$PROPS" ] || die "no broker was set up in $KDIR: run up first"
  if [ -n "$(broker_pids)" ]; then return 0; fi
  local t0=$SECONDS
  # shellcheck disable=SC2086 # HEAP holds several JVM flags
  nohup java $HEAP -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExitOnOutOfMemoryError \
    -Djava.awt.headless=true \
    "-Dlog4j2.configurationFile=$LOG4J2" "-Dkafka.logs.dir=$LOGDIR" -Dhookline.log.name=server \
    -cp "$LIB/*" kafka.Kafka "$PROPS" \
    </dev/null >>"$LOGDIR/kafka.out" 2>&1 &
  local pid=$!
  echo "$pid" >"$PIDFILE"
  local deadline=$((t0 + WAIT_S))
  until metadata_probe "$PORT"; do
    if ! alive "$pid"; then show_logs; rm -f "$PIDFILE"; die "broker process $pid exited during restart"; fi
    if [ $SECONDS -ge $deadline ]; then show_logs; die "broker not ready within ${WAIT_S}s of restart"; fi
    sleep 0.25
  done
  log "broker back in $((SECONDS - t0))s (pid $pid)"
}

if [ "$NODES" = 3 ]; then
  case "${1:-}" in
    up)     cluster_up ;;
    down)   cluster_down ;;
    kill)   [[ "${2:-}" =~ ^[123]$ ]] || die "usage: kafka.sh kill 1|2|3"; cluster_kill "$2" ;;
    start)  [[ "${2:-}" =~ ^[0123]$ ]] || die "usage: kafka.sh start 0|1|2|3"; cluster_start "$2" ;;
    status) for i in 1 2 3; do node_vars "$i"; if [ -n "$(broker_pids)" ]; then echo "node $i: running on 127.0.0.1:$NODE_PORT"; else echo "node $i: not running"; fi; done ;;
    env)    echo "HOOKLINE_TEST_KAFKA=$(cluster_bootstrap)" ;;
    *)      sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
  exit 0
elif [ "$NODES" != 1 ]; then
  die "HOOKLINE_KAFKA_NODES must be 1 or 3, got $NODES"
fi

case "${1:-}" in
  up)     cmd_up ;;
  down)   stop_broker ;;
  kill)   cmd_kill ;;
  start)  cmd_start ;;
  status) cmd_status ;;
  env)    echo "HOOKLINE_TEST_KAFKA=$BOOTSTRAP"
          echo "HOOKLINE_TEST_KAFKA_TLS=127.0.0.1:$TLSPORT"
          echo "HOOKLINE_TEST_KAFKA_TLS_CA=$TLSDIR/ca.pem" ;;
  *)      sed -n '2,40p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
