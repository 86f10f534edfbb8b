#!/usr/bin/env bash
# Fails (exit 1) listing every C++ file that Debian's clang-format (with the tree's
# .clang-format) would change. `scripts/check-format.sh --fix` formats them instead.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cc' '*.h' '*.cu' '*.cuh')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=$(clang-format --dry-run "${files[@]}" 2>&1 | grep -oE '^[^:]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u || true)
if [ -n "$bad" ]; then
  echo "check-format: these files are not formatted (run scripts/check-format.sh --fix):" >&2
  echo "$bad" >&2
  exit 1
fi
