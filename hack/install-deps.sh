#!/usr/bin/env bash
# Installs the Debian packages that local nodes need. Idempotent: installs only what is
# missing. As root it installs them; otherwise it prints what is missing and the command
# that installs it, and exits 0 (a non-root user can still run a control plane).
#
# Packages and what needs them:
#   containerd, runc                container runtime of each local instance
#   containernetworking-plugins    CNI reference plugins (bridge, host-local, loopback)
#   iproute2                       network namespaces, bridges and veth pairs (ip)
#   iptables, conntrack            kubelet and CNI plugins program them on nodes
#   util-linux                     nsenter, to run daemons inside a network namespace
#   awscli                         the AWS CLI (2.9), a real client of the local AWS in e2e tests
#   gcc, make, libc6-dev, bzip2    the busybox image's static busybox, built from upstream's source (hack/images/busybox.go)
set -euo pipefail

packages=(containerd runc containernetworking-plugins iproute2 iptables conntrack util-linux awscli gcc make libc6-dev bzip2)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all packages present (${packages[*]})"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "deps: missing packages: ${missing[*]}"
  echo "deps: install them as root with: apt-get update && apt-get install -y --no-install-recommends ${missing[*]}"
  echo "deps: without them nodejoin can run a control plane but no real nodes"
  exit 0
fi

if ! command -v apt-get >/dev/null; then
  echo "deps: missing packages ${missing[*]}, and this system has no apt-get: install them with its package manager" >&2
  exit 1
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# The Debian containerd package starts a system-wide containerd where an init system
# runs; nodejoin starts one per instance instead and does not use it.
echo "deps: installed ${missing[*]}"
