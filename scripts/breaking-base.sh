#!/usr/bin/env bash
# Prints the commit `buf breaking` compares the protos against: the last
# release tag (v*) reachable from HEAD, else the merge base of HEAD and
# main, else (HEAD is main itself, e.g. CI on a clone of main) HEAD's
# first parent, so every change to main is checked against what it
# replaced. Works detached; in a shallow clone it deepens the history
# when it can, and prints nothing when no such commit exists (a first
# commit): the caller then skips the check and says so.
set -euo pipefail

have() { git rev-parse --verify --quiet "$1^{commit}" >/dev/null; }

if [ "$(git rev-parse --is-shallow-repository)" = true ]; then
  git fetch --quiet --unshallow 2>/dev/null || git fetch --quiet --deepen=50 2>/dev/null || true
fi

if tag=$(git describe --tags --abbrev=0 --match 'v[0-9]*' HEAD 2>/dev/null); then
  git rev-parse "$tag^{commit}"
  exit 0
fi

# A single-branch clone has no main: fetch it when a remote has it.
if ! have refs/heads/main && ! have refs/remotes/origin/main; then
  git fetch --quiet origin main:refs/remotes/origin/main 2>/dev/null || true
fi

head=$(git rev-parse HEAD)
for main in refs/heads/main refs/remotes/origin/main; do
  if have "$main"; then
    base=$(git merge-base HEAD "$main" || true)
    if [ -n "$base" ] && [ "$base" != "$head" ]; then
      echo "$base"
      exit 0
    fi
    break
  fi
done

if have HEAD^1; then
  git rev-parse HEAD^1
fi
