#!/bin/sh
# Builds tests/cdi/reference/main.go, the CDI Go library's own verdict on specs, against each release of the
# library Debian packages. Idempotent: does nothing when the binaries are there and were built from the current
# sources.
#
# Debian 12 has no Go new enough for newer releases, so everything is fetched with a private apt state
# (scripts/debian-suites.sh: the system's apt configuration is not touched), unpacked with dpkg -x and built
# offline in GOPATH mode with the Go toolchain (golang-1.24) from trixie (Debian 13, a stable release):
#   - bin/cdi-reference: golang-tags.cncf-container-device-interface-dev at upstream release 1.0.1, from forky
#     (testing) or sid, with its dependencies from trixie;
#   - bin/cdi-reference-0.5.2: golang-github-container-orchestrated-devices-container-device-interface-dev
#     0.5.2, Debian 12's own, with its dependencies from bookworm: the library under its old import path, where
#     QualifiedName is in pkg/cdi.
# The versions are pinned: the tests model exactly these releases.
set -eu
cd "$(dirname "$0")/../.."
script=tests/cdi/setup.sh
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

cdi_release=1.0.1
old_release=0.5.2
tools=.tools/cdi-reference
binary=$tools/bin/cdi-reference
old_binary=$tools/bin/cdi-reference-$old_release
want="$cdi_release $old_release $(cat tests/cdi/reference/main.go tests/cdi/setup.sh | sha256sum | cut -c1-16)"
if [ -x "$binary" ] && [ -x "$old_binary" ] && [ "$(cat "$tools/stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi

# A failure must not stop the setup of the other test areas (scripts/setup runs every tests/*/setup.sh under
# set -e): the build runs as a child, and tests/cdi/test_reference.py fails instead, saying what is missing.
if [ "${1:-}" != build ]; then
    if ! sh "$script" build; then
        echo "tests/cdi/setup.sh: could not build $binary; tests/cdi/test_reference.py fails until it is built" >&2
    fi
    exit 0
fi

rm -rf "$tools"
mkdir -p "$tools/debs" "$tools/root" "$tools/bin" "$tools/debs-old" "$tools/root-old" "$tools/src-old"
. scripts/debian-suites.sh
private_apt_state "$tools/apt" bookworm trixie forky sid
# shellcheck disable=SC2086
cdi_version=$(apt-cache $PRIVATE_APT madison golang-tags.cncf-container-device-interface-dev |
    awk -F'|' -v r="$cdi_release" '{ gsub(/ /, "", $2) } index($2, r "-") == 1 { print $2; exit }')
if [ -z "$cdi_version" ]; then
    echo "tests/cdi/setup.sh: no Debian suite has golang-tags.cncf-container-device-interface-dev $cdi_release any more;" \
        "update tests/cdi (the model's library release) to the release Debian now ships" >&2
    exit 1
fi
packages="golang-tags.cncf-container-device-interface-dev=$cdi_version golang-1.24-go/trixie golang-1.24-src/trixie"
for dependency in golang-github-fsnotify-fsnotify-dev golang-github-opencontainers-runtime-tools-dev \
    golang-github-opencontainers-specs-dev golang-gocapability-dev golang-golang-x-mod-dev golang-golang-x-sys-dev \
    golang-gopkg-yaml.v3-dev golang-k8s-sigs-yaml-dev; do
    packages="$packages $dependency/trixie"
done
# shellcheck disable=SC2086
(cd "$tools/debs" && apt-get $PRIVATE_APT download -qq $packages >/dev/null)
for deb in "$tools"/debs/*.deb; do
    dpkg -x "$deb" "$tools/root"
done

goroot="$PWD/$tools/root/usr/lib/go-1.24"
GOROOT=$goroot GOPATH="$PWD/$tools/root/usr/share/gocode" GOCACHE="$PWD/$tools/gocache" GO111MODULE=off \
    GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=0 GOPROXY=off \
    "$goroot/bin/go" build -trimpath -ldflags "-X main.libraryVersion=$cdi_version" -o "$binary" \
    ./tests/cdi/reference/main.go

# shellcheck disable=SC2086
old_version=$(apt-cache $PRIVATE_APT madison golang-github-container-orchestrated-devices-container-device-interface-dev |
    awk -F'|' -v r="$old_release" '{ gsub(/ /, "", $2) } index($2, r "-") == 1 { print $2; exit }')
if [ -z "$old_version" ]; then
    echo "tests/cdi/setup.sh: bookworm has no golang-github-container-orchestrated-devices-container-device-interface-dev" \
        "$old_release any more; update tests/cdi to the release it ships" >&2
    exit 1
fi
packages="golang-github-container-orchestrated-devices-container-device-interface-dev=$old_version"
for dependency in golang-github-fsnotify-fsnotify-dev golang-github-hashicorp-go-multierror-dev \
    golang-github-hashicorp-errwrap-dev golang-github-pkg-errors-dev golang-golang-x-sys-dev \
    golang-k8s-sigs-yaml-dev golang-gopkg-yaml.v2-dev golang-github-opencontainers-specs-dev \
    golang-github-opencontainers-runc-dev golang-github-opencontainers-runtime-tools-dev golang-github-blang-semver-dev \
    golang-github-opencontainers-selinux-dev golang-github-sirupsen-logrus-dev golang-gocapability-dev \
    golang-github-xeipuuv-gojsonschema-dev golang-github-xeipuuv-gojsonpointer-dev \
    golang-github-xeipuuv-gojsonreference-dev; do
    packages="$packages $dependency/bookworm"
done
# shellcheck disable=SC2086
(cd "$tools/debs-old" && apt-get $PRIVATE_APT download -qq $packages >/dev/null)
for deb in "$tools"/debs-old/*.deb; do
    dpkg -x "$deb" "$tools/root-old"
done
sed -e 's|tags.cncf.io/container-device-interface/pkg/cdi|github.com/container-orchestrated-devices/container-device-interface/pkg/cdi|' \
    -e '/container-device-interface\/pkg\/parser"/d' -e 's/parser\.QualifiedName/cdi.QualifiedName/' \
    tests/cdi/reference/main.go >"$tools/src-old/main.go"
GOROOT=$goroot GOPATH="$PWD/$tools/root-old/usr/share/gocode" GOCACHE="$PWD/$tools/gocache" GO111MODULE=off \
    GOTOOLCHAIN=local GOFLAGS= CGO_ENABLED=0 GOPROXY=off \
    "$goroot/bin/go" build -trimpath -ldflags "-X main.libraryVersion=$old_version" -o "$old_binary" \
    "./$tools/src-old/main.go"
# Keep only the binary: the toolchain and sources are 500 MB.
rm -rf "$tools/root" "$tools/debs" "$tools/root-old" "$tools/debs-old" "$tools/src-old" "$tools/gocache" "$tools/apt"
echo "$want" >"$tools/stamp"
echo "tests/cdi/setup.sh: built $binary against the CDI library $cdi_version, $old_binary against $old_version"
