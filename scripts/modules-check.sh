#!/usr/bin/env bash
# Checks the go.work modules as a module's own user would meet them
# ([engine-shape] item 6), for `make lint`:
#   1. each module's go.mod and go.sum are tidy (go mod tidy -diff);
#   2. each module builds on its own, outside the workspace (GOWORK=off:
#      its go.mod, replace lines included, is all it needs);
#   3. a dependency two modules share is required at one version in all
#      of them, so what a test of one module ran is what another ships.
# Usage: scripts/modules-check.sh MODULE...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
fail=0
for m in "$@"; do
  if ! out=$(cd "$root/$m" && GOWORK=off GOFLAGS=-mod=mod go mod tidy -diff 2>&1); then
    echo "modules-check: $m: go.mod/go.sum not tidy (run: cd $m && go mod tidy):"; echo "$out" | head -40
    fail=1
  fi
  if ! out=$(cd "$root/$m" && GOWORK=off go build ./... 2>&1); then
    echo "modules-check: $m does not build outside the workspace (GOWORK=off):"; echo "$out" | head -20
    fail=1
  fi
done
# path version module, for every require line of every module.
mismatch=$(for m in "$@"; do
  awk -v m="$m" '/^require \($/{r=1; next} /^\)$/{r=0} r && NF>=2 {print $1, $2, m} /^require [^(]/{print $2, $3, m}' "$root/$m/go.mod"
done | sort -k1,1 -k2,2 | awk '
  { if ($1 != path) { if (n > 1) print line; path = $1; n = 0; line = $1 ":"; last = "" }
    if ($2 != last) { n++; last = $2 }
    line = line " " $2 " (" $3 ")" }
  END { if (n > 1) print line }')
if [ -n "$mismatch" ]; then
  echo "modules-check: modules require different versions of one dependency (align them with go get in the older ones):"
  echo "$mismatch"
  fail=1
fi
if [ $fail -eq 0 ]; then
  echo "modules-check: $# modules tidy, each built on its own, one version of each shared dependency"
fi
exit $fail
