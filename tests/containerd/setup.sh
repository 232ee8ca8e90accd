#!/bin/sh
# containerd releases other than Debian 12's 1.6 (installed by scripts/setup test), for tests/containerd:
# 1.7 from Debian trixie and 2.x from Debian sid, downloaded with a private apt state that points at the same
# Debian mirror as this machine's sources, and unpacked (dpkg -x) under .tools/. They run on Debian 12.
# Idempotent: a suite whose binary is already unpacked is skipped. Run as root, from anywhere.
set -eu
cd "$(dirname "$0")/../.."
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH"

need=""
for suite in trixie sid; do
    [ -x ".tools/containerd-$suite/usr/bin/containerd" ] || need="$need $suite"
done
[ -n "$need" ] || exit 0

# The Debian mirror this machine uses: the first active "deb" source whose path ends in /debian.
mirror=$(
    {
        cat /etc/apt/sources.list 2>/dev/null || true
        for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] && cat "$f"
        done
    } | sed -n -e 's/^deb \(\[[^]]*\] \)\{0,1\}\([^ ]*\) .*/\2/p' -e 's/^URIs: *//p' | tr ' ' '\n' \
        | grep -E '^https?://[^ ]*/debian/?$' | head -n 1
)
mirror=${mirror:-http://deb.debian.org/debian}

state=$(mktemp -d)
trap 'rm -rf "$state"' EXIT
mkdir -p "$state/lists/partial" "$state/cache/archives/partial" "$state/debs"
: >"$state/status"
for suite in $need; do
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite main"
done >"$state/sources.list"
apt_opts="-o Dir::State::Lists=$state/lists -o Dir::Etc::SourceList=$state/sources.list
          -o Dir::Etc::SourceParts=/dev/null -o Dir::Cache=$state/cache -o Dir::State::status=$state/status
          -o APT::Sandbox::User=root -o Debug::NoLocking=1"
# shellcheck disable=SC2086
apt-get $apt_opts -qq update
for suite in $need; do
    (
        cd "$state/debs"
        # shellcheck disable=SC2086
        apt-get $apt_opts -qq download "containerd/$suite"
    )
    deb=$(ls "$state"/debs/containerd_*.deb)
    rm -rf ".tools/containerd-$suite"
    mkdir -p ".tools/containerd-$suite"
    dpkg -x "$deb" ".tools/containerd-$suite"
    rm -f "$deb"
    echo "tests/containerd: $(".tools/containerd-$suite/usr/bin/containerd" --version) in .tools/containerd-$suite"
done
