#!/usr/bin/env bash
# Builds the pinned Kubernetes and etcd binaries into bin/ from the hack/tools modules.
#
# The binaries are keyed by a hash of the tools modules' go.mod/go.sum files and this
# script. A build is skipped when bin/ already holds binaries for the current key, and
# copied from the per-user cache ($NODEJOIN_TOOLS_CACHE, default
# ~/.cache/nodejoin/tools/<key>) when another checkout already built them.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
tools="$root/hack/tools"
k8s_cmds=(kube-apiserver kubelet kube-controller-manager kubectl)
all=("${k8s_cmds[@]}" etcd)

key=$(cat "$tools/go.mod" "$tools/go.sum" "$tools/etcd/go.mod" "$tools/etcd/go.sum" "$0" | sha256sum | cut -c1-16)
cache="${NODEJOIN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodejoin/tools}/$key"

complete() { # DIR: true when DIR holds every binary and the key stamp
  local d=$1 b
  [ "$(cat "$d/.tools-key" 2>/dev/null)" = "$key" ] || return 1
  for b in "${all[@]}"; do [ -x "$d/$b" ] || return 1; done
}

if complete "$bin"; then
  echo "tools: bin/ is up to date (key $key)"
  exit 0
fi
mkdir -p "$bin"
if complete "$cache"; then
  echo "tools: copying cached binaries from $cache"
  for b in "${all[@]}"; do cp "$cache/$b" "$bin/.$b.tmp" && mv -f "$bin/.$b.tmp" "$bin/$b"; done
  echo "$key" > "$bin/.tools-key"
  exit 0
fi

export CGO_ENABLED=0
cd "$tools"
version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
built=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
major=${version#v}; major=${major%%.*}
minor=${version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$built"
done

rm -f "$bin/.tools-key"
n=0
start=$SECONDS
for cmd in "${k8s_cmds[@]}"; do
  n=$((n + 1))
  echo "tools: [$n/${#all[@]}] building $cmd $version (cold builds take minutes)"
  go build -trimpath -ldflags "$ldflags" -o "$bin/.$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
  mv -f "$bin/.$cmd.tmp" "$bin/$cmd"
done
cd "$tools/etcd"
etcd_version=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)
echo "tools: [${#all[@]}/${#all[@]}] building etcd $etcd_version"
go build -trimpath -ldflags "-s -w" -o "$bin/.etcd.tmp" .
mv -f "$bin/.etcd.tmp" "$bin/etcd"
echo "$key" > "$bin/.tools-key"
echo "tools: built in $((SECONDS - start))s"

if mkdir -p "$cache" 2>/dev/null; then
  for b in "${all[@]}"; do cp "$bin/$b" "$cache/.$b.tmp" && mv -f "$cache/.$b.tmp" "$cache/$b"; done
  echo "$key" > "$cache/.tools-key"
fi
