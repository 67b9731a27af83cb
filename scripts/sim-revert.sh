#!/usr/bin/env bash
# sim-revert.sh COMMIT... — does make sim find the defect each fix commit
# fixed? For each commit: a temporary worktree of the current HEAD (or of
# BASE=<rev>, for fixes that later work built on: the first commit that
# holds both the simulation and the fix reverts most cleanly), that
# commit's non-test changes reverted (its *_test.go, testdata and docs
# stay), make sim over the default seeds (or SEEDS=… / DURATION=… from
# the environment), and one row: found or not, by which seeds, how long.
# The table is printed and written to bin/sim/revert.md; logs stay in
# bin/sim/revert-<commit>.log (the make output) and
# bin/sim/revert-<commit>.last.log (every line of the run), with any
# seed's stall or hang dump beside them. Exit status: 0 when every commit's defect
# was found, 1 otherwise (2: a commit did not revert cleanly).
# A+B reverts several commits together (newest first), for a fix that a
# later commit built on. A path ending in .patch is applied to the tree
# instead (scripts/reverts/: a fix's old code path re-introduced by
# hand where the commit no longer reverts).
#
#   scripts/sim-revert.sh $(git log --format=%h --grep='^fix(' main..HEAD)
#   SEEDS=5 scripts/sim-revert.sh cff1fd7 e32da96+e512406
#   BASE=6c648f1 scripts/sim-revert.sh NONE f3a9f67 1799969
#   scripts/sim-revert.sh scripts/reverts/item3-probe-set-aside.patch
# With NONE as a commit the row reverts nothing: the base's own result,
# to tell a revert's finding from what the base fails anyway.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 COMMIT..." >&2
  exit 64
fi
root=$(git rev-parse --show-toplevel)
out=$root/bin/sim
mkdir -p "$out"
table=$out/revert.md
{
  echo "| fix commit | subject | found | by seeds | took |"
  echo "|---|---|---|---|---:|"
} > "$table"
status=0
for arg in "$@"; do
  # The commits of this row, newest first, so each reverse patch applies
  # to the tree the next-newer one left.
  patch=
  if [ "$arg" = NONE ]; then
    group=()
    c=none
    subject="nothing reverted: ${BASE:-HEAD} itself"
  elif [[ "$arg" == *.patch ]]; then
    # A fix that no longer reverts as a commit: a patch that puts its old
    # code path back on today's tree (scripts/reverts/, its first line
    # says which defect).
    group=()
    patch=$(realpath "$arg")
    c=$(basename "$arg" .patch)
    subject=$(head -1 "$patch" | tr '|' '/')
  else
    mapfile -t group < <(git -C "$root" rev-list --no-walk=sorted --topo-order ${arg//+/ } | cut -c1-7)
    c=$(IFS=+; echo "${group[*]}")
    subject=$(for g in "${group[@]}"; do git -C "$root" log -1 --format=%s "$g" | cut -c1-60; done | awk 'NR>1{printf " + "}{printf "%s", $0}' | tr '|' '/')
  fi
  wt=$(mktemp -d "${TMPDIR:-/tmp}/sim-revert-$c.XXXXXX")
  git -C "$root" worktree add --quiet --detach "$wt" "${BASE:-HEAD}"
  log=$out/revert-$c.log
  : > "$log"
  reverted=1
  for g in "${group[@]}"; do
    mapfile -t files < <(git -C "$root" diff-tree --no-commit-id --name-only -r "$g" |
      grep -v -e '_test\.go$' -e '/testdata/' -e '\.md$' || true)
    if [ ${#files[@]} -eq 0 ] || ! git -C "$root" show "$g" -- "${files[@]}" | git -C "$wt" apply -R --3way >>"$log" 2>&1; then
      reverted=0
      break
    fi
  done
  if [ -n "$patch" ] && ! git -C "$wt" apply "$patch" >>"$log" 2>&1; then
    reverted=0
  fi
  if [ "$reverted" -eq 0 ]; then
    echo "| $c | $subject | does not revert cleanly on ${BASE:-HEAD}, or has no non-test change (see $log) | | |" >> "$table"
    git -C "$root" worktree remove --force "$wt"
    status=2
    continue
  fi
  start=$(date +%s)
  rc=0
  make -C "$wt" sim SEEDS="${SEEDS:-}" DURATION="${DURATION:-}" >>"$log" 2>&1 || rc=$?
  took=$(( $(date +%s) - start ))
  seeds=$(grep -ho 'rerun: make sim SEEDS=[0-9,]*' "$wt/bin/sim/results.md" 2>/dev/null | sed 's/.*SEEDS=//' || true)
  cp "$wt/bin/sim/results.md" "$out/revert-$c.results.md" 2>/dev/null || true
  # The run's whole log and any stall or hang dump outlive the worktree.
  cp "$wt/bin/sim/last.log" "$out/revert-$c.last.log" 2>/dev/null || true
  for f in "$wt"/bin/sim/seed-*-stall.txt "$wt"/bin/sim/seed-*-hang.txt; do
    [ -e "$f" ] && cp "$f" "$out/revert-$c-$(basename "$f")"
  done
  if [ "$rc" -ne 0 ] && [ -n "$seeds" ]; then
    echo "| $c | $subject | yes | $seeds | ${took}s |" >> "$table"
  elif [ "$rc" -ne 0 ]; then
    echo "| $c | $subject | make sim failed without a violation (build? see $log) | | ${took}s |" >> "$table"
    status=1
  else
    echo "| $c | $subject | no | | ${took}s |" >> "$table"
    status=1
  fi
  git -C "$root" worktree remove --force "$wt"
done
cat "$table"
exit $status
