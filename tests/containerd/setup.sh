#!/bin/sh
# containerd releases other than Debian 12's 1.6 (installed by scripts/setup test), for tests/containerd:
# 1.7 from Debian trixie and 2.x from Debian sid, downloaded with a private apt state (scripts/debian-suites.sh)
# and unpacked (dpkg -x) under .tools/. They run on Debian 12.
# Idempotent: a suite whose binary is already unpacked is skipped. Run as root, from anywhere.
set -eu
cd "$(dirname "$0")/../.."
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

need=""
for suite in trixie sid; do
    [ -x ".tools/containerd-$suite/usr/bin/containerd" ] || need="$need $suite"
done
[ -n "$need" ] || exit 0

state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/debs"
. scripts/debian-suites.sh
# shellcheck disable=SC2086
private_apt_state "$state/apt" $need
for suite in $need; do
    (
        cd "$state/debs"
        # shellcheck disable=SC2086
        apt-get $PRIVATE_APT -qq download "containerd/$suite"
    )
    deb=$(ls "$state"/debs/containerd_*.deb)
    rm -rf ".tools/containerd-$suite"
    mkdir -p ".tools/containerd-$suite"
    dpkg -x "$deb" ".tools/containerd-$suite"
    rm -f "$deb"
    echo "tests/containerd: $(".tools/containerd-$suite/usr/bin/containerd" --version) in .tools/containerd-$suite"
done
