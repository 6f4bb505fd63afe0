#!/usr/bin/env bash
# What `make test` runs after its set-up, in three lanes:
#
#   1. the packages whose tests change the host's network (namespaces, links, routes),
#      alone, so that no other test sees their interfaces come and go;
#   2. the end-to-end tests (test/e2e: local clusters of real kubelets), which spend most
#      of their time waiting for kubelets, images and drains;
#   3. beside them, the fuzz targets (at a lower CPU priority) and then every other
#      package's unit and integration tests, one package at a time.
#
# Lanes 2 and 3 overlap because the e2e lane leaves the CPUs mostly idle (a whole CI run
# used about 15 CPU-minutes in 30 minutes of wall time on 2 cores). Each lane's lines are
# prefixed with its name; the run fails if any lane fails, and says which.
set -uo pipefail
cd "$(dirname "$0")/.."
go=${GO:-go}
# shellcheck disable=SC2206 # TEST_FLAGS is a list of flags, split on purpose.
flags=(${TEST_FLAGS:--p 1 -timeout 30m})

host_pkgs=(./internal/controlplane/... ./internal/netagent/cniplugin/... ./internal/netagent/hostsetup/...
  ./internal/netagent/ipamd/hostnet/... ./internal/netns/... ./internal/sandbox/instance/... ./test/conformance/...)
mapfile -t host < <("$go" list "${host_pkgs[@]}")
mapfile -t rest < <("$go" list ./... | grep -vxF -f <(printf '%s\n' "${host[@]}" github.com/nodejoin/nodejoin/test/e2e))

lane() { # name, command...: runs the command with its lines prefixed by name
  local name=$1
  shift
  "$@" 2>&1 | sed -u "s/^/$name | /"
}

start=$SECONDS
failed=()
echo "test: lane host: ${#host[@]} packages that change the host's network, alone"
lane host "$go" test "${flags[@]}" "${host[@]}" || failed+=(host)

echo "test: lanes e2e and unit, side by side (${#rest[@]} packages in unit, after the fuzz targets)"
# The e2e package alone takes about half an hour on 2 cores: it gets its own, longer
# timeout (the last -timeout given wins).
lane e2e "$go" test "${flags[@]}" -timeout "${E2E_TIMEOUT:-75m}" ./test/e2e &
e2e=$!
lane unit bash -c 'nice -n 10 hack/fuzz.sh && "$0" test "$@"' "$go" "${flags[@]}" "${rest[@]}" &
unit=$!
wait "$unit" || failed+=(unit)
wait "$e2e" || failed+=(e2e)

elapsed=$((SECONDS - start))
if ((${#failed[@]})); then
  echo "test: FAILED in lane(s) ${failed[*]} after ${elapsed}s (search this log for 'FAIL' under those prefixes)"
  exit 1
fi
echo "test: every lane passed in ${elapsed}s"
