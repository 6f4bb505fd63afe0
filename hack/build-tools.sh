#!/usr/bin/env bash
# Builds the pinned tools into bin/: the Kubernetes v1.37.1 commands, agnhost, e2e.test and
# ginkgo from hack/tools, etcd from hack/tools/etcd, CoreDNS from hack/tools/coredns, the
# CNI plugins loopback and portmap (for the aws-node image) from hack/tools/cniplugins,
# eksctl (a real client of the local AWS in e2e tests) and helm (charts/ is linted and
# rendered with it, and deploy/ generated from it) from their pinned releases' module source.
#
#   hack/build-tools.sh            every tool (what `make tools` runs)
#   hack/build-tools.sh NAME...    only these (for example: e2e.test ginkgo)
#
# Each binary has its own key: a hash of its recipe (package, build mode, flags, ldflags),
# the Go toolchain and target, and the exact module versions and local sources it is
# compiled from (`go list -deps`). A change that does not reach a binary's dependencies
# (another tool added to go.mod, an edit of this script) leaves its key alone. bin/NAME
# is kept when bin/.tools/NAME.key holds the key, copied from the per-user cache
# ($NODEJOIN_TOOLS_CACHE, default ~/.cache/nodejoin/tools/NAME/KEY) when another checkout
# built it, and built otherwise. Every file is written to a temporary name and renamed.
set -euo pipefail
shopt -s inherit_errexit # a failing `go list` inside $(...) stops the script

root=$(cd "$(dirname "$0")/.." && pwd)
bin="$root/bin"
tools="$root/hack/tools"
cache="${NODEJOIN_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/nodejoin/tools}"
# Cached builds kept per binary (the most recently used); older ones are removed.
keep=3

# Every tool, in build order: what a cluster runs first, the large test binary last.
all=(kube-apiserver kubelet kube-controller-manager kube-scheduler kube-proxy kubectl etcd coredns loopback portmap agnhost ginkgo e2e.test eksctl helm)

# eksctl's pinned release. Its go.mod carries replace directives, so `go install
# github.com/weaveworks/eksctl/cmd/eksctl@VERSION` refuses it; its module source (verified
# against the checksum database like any module) is copied and built with -mod=mod.
eksctl_version=v0.230.0
# helm's pinned release (Helm 4; charts/ stays apiVersion v2, which Helm 3 installs too).
# Its go.mod has no replace directives: it builds in the module cache as downloaded.
helm_version=v4.3.1

# The Kubernetes binaries share CGO_ENABLED=0, -trimpath and no build tags, so their
# packages are compiled once into the Go build cache and a further binary mostly links.
export CGO_ENABLED=0
export GOFLAGS=-mod=readonly

usage() {
  echo "usage: $0 [NAME...]   (names: ${all[*]})" >&2
  exit 2
}

# versions sets k8s_flags (the version ldflags of the pinned k8s.io/kubernetes, so that
# `kubectl version` and `e2e.test --version` report it) and agnhost_version (the pinned
# source's test/images/agnhost/VERSION, the tag of the upstream image
# registry.k8s.io/e2e-test-images/agnhost:<version>), once.
k8s_flags= agnhost_version=
versions() {
  [ -z "$k8s_flags" ] || return 0
  local version built major minor pkg dir
  version=$(cd "$tools" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  built=$(cd "$tools" && go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
  major=${version#v}; major=${major%%.*}
  minor=${version#v*.}; minor=${minor%%.*}
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    k8s_flags+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor"
    k8s_flags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$built"
  done
  dir=$(cd "$tools" && go mod download -json k8s.io/kubernetes | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  agnhost_version=$(tr -d ' \n' < "$dir/test/images/agnhost/VERSION")
}

# recipe NAME sets mod (module directory), mode (build or test), pkg, tags and ldflags.
recipe() {
  mod=$tools mode=build tags= ldflags="-s -w"
  case $1 in
    kube-apiserver|kubelet|kube-controller-manager|kube-scheduler|kube-proxy|kubectl)
      versions
      pkg=k8s.io/kubernetes/cmd/$1
      ldflags+=$k8s_flags ;;
    agnhost)
      versions
      pkg=k8s.io/kubernetes/test/images/agnhost
      ldflags+="$k8s_flags -X main.Version=$agnhost_version" ;;
    e2e.test)
      # The test binary of the e2e suite, as upstream builds it with `go test -c`
      # (vet would only re-check the pinned source).
      versions
      mode=test pkg=k8s.io/kubernetes/test/e2e
      ldflags+=$k8s_flags ;;
    ginkgo)
      # The CLI at the version k8s.io/kubernetes pins for the library (parallel runs).
      pkg=github.com/onsi/ginkgo/v2/ginkgo ;;
    etcd)
      mod=$tools/etcd pkg=. ;;
    coredns)
      # grpcnotrace as upstream's Makefile; the version is the module's own.
      mod=$tools/coredns pkg=. tags=grpcnotrace
      ldflags+=" -X github.com/coredns/coredns/coremain.GitCommit=$(cd "$tools/coredns" && go list -m -f '{{.Version}}' github.com/coredns/coredns)" ;;
    loopback|portmap)
      # containernetworking/plugins' reference plugins, with the version their
      # `--version`/VERSION output reports, as upstream's build script sets it.
      mod=$tools/cniplugins
      pkg=github.com/containernetworking/plugins/plugins/main/$1
      [ "$1" = portmap ] && pkg=github.com/containernetworking/plugins/plugins/meta/$1
      ldflags+=" -X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$(cd "$tools/cniplugins" && go list -m -f '{{.Version}}' github.com/containernetworking/plugins)" ;;
    eksctl)
      local info
      info=$(env -C / GOFLAGS= go mod download -json "github.com/weaveworks/eksctl@$eksctl_version")
      mod=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
      [ -n "$mod" ] || { echo "tools: cannot download eksctl $eksctl_version" >&2; exit 1; }
      pkg=./cmd/eksctl
      # `eksctl version` reports the release (no "dev" pre-release ID) with its commit and
      # date, as its release build sets them.
      ldflags+=" -X github.com/weaveworks/eksctl/pkg/version.PreReleaseID="
      ldflags+=" -X github.com/weaveworks/eksctl/pkg/version.gitCommit=$(sed -n 's/^[[:space:]]*"Hash": "\([0-9a-f]\{7\}\).*/\1/p' <<<"$info")"
      ldflags+=" -X github.com/weaveworks/eksctl/pkg/version.buildDate=$(sed -n 's/.*"Time":"\([^"]*\)".*/\1/p' "$(sed -n 's/^[[:space:]]*"Info": "\(.*\)",$/\1/p' <<<"$info")")" ;;
    helm)
      local info
      info=$(env -C / GOFLAGS= go mod download -json "helm.sh/helm/v4@$helm_version")
      mod=$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"$info")
      [ -n "$mod" ] || { echo "tools: cannot download helm $helm_version" >&2; exit 1; }
      pkg=./cmd/helm
      # `helm version` reports the release, as helm's Makefile sets it (the module proxy
      # gives no commit).
      ldflags+=" -X helm.sh/helm/v4/internal/version.version=$helm_version -X helm.sh/helm/v4/internal/version.gitTreeState=clean" ;;
    *) echo "tools: unknown tool $1" >&2; usage ;;
  esac
}

# describe prints the recipe of the current tool as text for its keys.
describe() {
  printf 'mode=%s pkg=%s tags=%s ldflags=%s cgo=%s flags=-trimpath,-buildvcs=false\n' \
    "$mode" "$pkg" "$tags" "$ldflags" "$CGO_ENABLED"
  (cd "$mod" && go env GOVERSION GOOS GOARCH GOAMD64 GOEXPERIMENT)
}

# fast_key hashes what `go list` reads (recipe, toolchain, go.mod, go.sum and the
# module's own Go files): it names the remembered exact key, so an unchanged tool costs
# no `go list`.
fast_key() {
  { describe; cat "$mod/go.mod" "$mod/go.sum"; find "$mod" -maxdepth 1 -name '*.go' -print0 | sort -z | xargs -0r cat; } |
    sha256sum | cut -c1-16
}

# exact_key hashes the recipe, the toolchain and every module version (and replacement)
# the binary is compiled from, plus the contents of the local files among its sources.
exact_key() {
  if [ "$name" = eksctl ] || [ "$name" = helm ]; then
    # A released module's source never changes (the checksum database pins it): the
    # recipe, toolchain, go.mod and go.sum hashed by fast_key name it exactly.
    fast_key
    return
  fi
  local testflag=()
  [ "$mode" = test ] && testflag=(-test)
  {
    describe
    (cd "$mod" && go list "${testflag[@]}" -deps -f \
      '{{with .Module}}{{if .Main}}{{range $.GoFiles}}file {{$.Dir}}/{{.}}{{"\n"}}{{end}}{{else}}module {{.Path}}@{{.Version}}{{with .Replace}} => {{.Path}}@{{.Version}}{{end}}{{"\n"}}{{end}}{{end}}' \
      "$pkg") | sort -u | while read -r kind what; do
      if [ "$kind" = file ]; then
        echo "file ${what#"$mod"/} $(sha256sum < "$what" | cut -c1-64)"
      else
        echo "module $what"
      fi
    done
  } | sha256sum | cut -c1-16
}

# write_atomic SRC DST copies SRC to DST through a temporary file in DST's directory.
write_atomic() {
  local tmp
  tmp="$(dirname "$2")/.$(basename "$2").tmp.$$"
  cp "$1" "$tmp"
  mv -f "$tmp" "$2"
}

# prune DIR removes all but the $keep most recently used builds in DIR.
prune() {
  find "$1" -maxdepth 1 -type f -regex '.*/[0-9a-f]+' -printf '%T@ %p\n' | sort -rn |
    tail -n +$((keep + 1)) | cut -d' ' -f2- | xargs -r rm -f
}

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${all[@]}")
for name in "${names[@]}"; do recipe "$name"; done # rejects unknown names before any work

mkdir -p "$bin/.tools" "$cache/keys"
start=$SECONDS
built=() copied=() current=()
i=0
for name in "${names[@]}"; do
  i=$((i + 1))
  step="tools: [$i/${#names[@]}]"
  recipe "$name"
  fast=$(fast_key)
  key=$(cat "$cache/keys/$fast" 2>/dev/null || true)
  if [ -z "$key" ]; then
    key=$(exact_key)
    echo "$key" > "$cache/keys/.$fast.tmp.$$"
    mv -f "$cache/keys/.$fast.tmp.$$" "$cache/keys/$fast"
  fi
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/.tools/$name.key" 2>/dev/null)" = "$key" ]; then
    current+=("$name")
    continue
  fi
  dir="$cache/$name"
  mkdir -p "$dir"
  # One build per tool at a time across checkouts: a second `make tools` waits, then copies.
  exec {lock}>"$dir/.lock"
  flock "$lock"
  if [ -x "$dir/$key" ]; then
    echo "$step $name: copying the cached build (key $key)"
    touch "$dir/$key"
    copied+=("$name")
  else
    echo "$step building $name (cold builds take minutes)"
    t=$SECONDS
    out="$dir/.$key.tmp.$$"
    if [ "$name" = eksctl ]; then
      # The module cache is read-only and -mod=mod rewrites go.mod and go.sum: build a copy.
      src=$(mktemp -d)
      cp -r "$mod/." "$src" && chmod -R u+w "$src"
      (cd "$src" && GOFLAGS=-mod=mod go build -trimpath -buildvcs=false -ldflags "$ldflags" -o "$out" "$pkg")
      rm -rf "$src"
    elif [ "$mode" = test ]; then
      (cd "$mod" && go test -c -vet=off -trimpath -buildvcs=false -tags "$tags" -ldflags "$ldflags" -o "$out" "$pkg")
    else
      (cd "$mod" && go build -trimpath -buildvcs=false -tags "$tags" -ldflags "$ldflags" -o "$out" "$pkg")
    fi
    mv -f "$out" "$dir/$key"
    echo "$step built $name in $((SECONDS - t))s ($(du -m "$dir/$key" | cut -f1) MiB)"
    built+=("$name")
    prune "$dir"
  fi
  rm -f "$bin/.tools/$name.key"
  write_atomic "$dir/$key" "$bin/$name"
  exec {lock}>&-
  echo "$key" > "$bin/.tools/.$name.key.tmp.$$"
  mv -f "$bin/.tools/.$name.key.tmp.$$" "$bin/.tools/$name.key"
done
rm -f "$bin/.tools-key" # the single key of earlier versions of this script

summary="tools: ${#names[@]} up to date in bin/ after $((SECONDS - start))s"
[ ${#built[@]} -eq 0 ] || summary+="; built: ${built[*]}"
[ ${#copied[@]} -eq 0 ] || summary+="; copied from $cache: ${copied[*]}"
echo "$summary"
