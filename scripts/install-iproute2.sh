#!/usr/bin/env bash
# iproute2 (`ip netns`, `tc`) for the fault tests that build two hosts out of
# network namespaces (tests/tests/launch_netns.rs, ssp_mf_netns.rs; issue 42).
# A no-op when `ip` and `tc` are there; installs Debian's iproute2 when run as
# root with apt-get; otherwise says so (those tests then print SKIPPED
# locally, and fail under CI, which runs as root).
set -euo pipefail
if command -v ip >/dev/null && command -v tc >/dev/null; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
    exit 0
fi
echo "install-iproute2.sh: no ip/tc and cannot install iproute2 (needs root and apt-get)" >&2
