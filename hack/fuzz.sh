#!/usr/bin/env bash
# Runs every fuzz target of the main module for FUZZTIME each (default 20000x: twenty
# thousand generated inputs; a duration such as 30s works too): decoders must not panic
# or grow without bound on hostile input. New findings are saved under the package's
# testdata/fuzz/ and then replayed by every `go test`. A count rather than a duration
# keeps `make test` free of Go's fuzzing flake that fails a run whose time ends while an
# input is being minimized ("context deadline exceeded").
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${FUZZTIME:-20000x}
targets=$(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]+\(f \*testing\.F\)' . | sort)
n=0
for file in $targets; do
  pkg=./$(dirname "${file#./}")
  for fn in $(grep -oE '^func Fuzz[A-Za-z0-9_]+' "$file" | awk '{print $2}'); do
    n=$((n + 1))
    echo "fuzz: $pkg $fn ($fuzztime)"
    log=$(mktemp)
    if ! go test -run '^$' -timeout 5m -fuzz "^${fn}\$" -fuzztime "$fuzztime" "$pkg" > "$log" 2>&1; then
      # Show why, and where the failing input was saved (the package's testdata/fuzz/).
      tail -n 40 "$log"
      rm -f "$log"
      exit 1
    fi
    tail -n 1 "$log"
    rm -f "$log"
  done
done
echo "fuzz: $n targets passed"
