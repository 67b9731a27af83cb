#!/usr/bin/env bash
# sim-revert.sh COMMIT... — does make sim find the defect each fix commit
# fixed? For each commit: a temporary worktree of the current HEAD, that
# commit's non-test changes reverted (its *_test.go, testdata and docs
# stay), make sim over the default seeds (or SEEDS=… / DURATION=… from
# the environment), and one row: found or not, by which seeds, how long.
# The table is printed and written to bin/sim/revert.md; logs stay in
# bin/sim/revert-<commit>.log. Exit status: 0 when every commit's defect
# was found, 1 otherwise (2: a commit did not revert cleanly).
#
#   scripts/sim-revert.sh $(git log --format=%h --grep='^fix(' main..HEAD)
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
for c in "$@"; do
  c=$(git -C "$root" rev-parse --short "$c")
  subject=$(git -C "$root" log -1 --format=%s "$c" | cut -c1-80 | tr '|' '/')
  mapfile -t files < <(git -C "$root" diff-tree --no-commit-id --name-only -r "$c" |
    grep -v -e '_test\.go$' -e '/testdata/' -e '\.md$' || true)
  if [ ${#files[@]} -eq 0 ]; then
    echo "| $c | $subject | no non-test change to revert | | |" >> "$table"
    status=2
    continue
  fi
  wt=$(mktemp -d "${TMPDIR:-/tmp}/sim-revert-$c.XXXXXX")
  git -C "$root" worktree add --quiet --detach "$wt" HEAD
  log=$out/revert-$c.log
  if ! git -C "$root" show "$c" -- "${files[@]}" | git -C "$wt" apply -R --3way >"$log" 2>&1; then
    echo "| $c | $subject | does not revert cleanly on HEAD (see $log) | | |" >> "$table"
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
