#!/bin/sh
# Fetches the runtime-spec's own JSON schemas, the reference tests/documents/test_schema_agreement.py and
# tests/oci/test_runtime_spec_1_3.py hold nvidia_oci_hook/kinds/schemas/oci-config.schema.json to, into
# .tools/oci-schema. Idempotent: does nothing when the schemas are there and were fetched by this script as it is.
#
# Debian 12's golang-github-opencontainers-specs-dev carries a snapshot from before runtime-spec 1.1.0, so the
# package is fetched with a private apt state (scripts/debian-suites.sh: the system's apt configuration is not
# touched) from experimental or sid, pinned to upstream release 1.3.0: our schema models exactly this release.
# It is unpacked with dpkg -x and only its schema/*.json files are kept. Needs root and the Debian archive that
# apt's own sources name, when there is something to fetch.
set -eu
cd "$(dirname "$0")/../.."
script=tests/oci/setup.sh
export PATH="/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

spec_release=1.3.0
tools=.tools/oci-schema
schema=usr/share/gocode/src/github.com/opencontainers/runtime-spec/schema
want="$spec_release $(sha256sum <"$script" | cut -c1-16)"
if [ -f "$tools/$schema/config-schema.json" ] && [ "$(cat "$tools/stamp" 2>/dev/null)" = "$want" ]; then
    exit 0
fi

# A failure must not stop the setup of the other test areas (scripts/setup runs every tests/*/setup.sh under
# set -e): the fetch runs as a child, and the schema-agreement tests fail instead, saying what is missing.
if [ "${1:-}" != fetch ]; then
    if ! sh "$script" fetch; then
        echo "tests/oci/setup.sh: could not fetch the runtime-spec $spec_release schemas into $tools; the tests that" \
            "hold our OCI schema to them fail until they are there" >&2
    fi
    exit 0
fi

rm -rf "$tools"
mkdir -p "$tools/debs" "$tools/root"
. scripts/debian-suites.sh
private_apt_state "$tools/apt" experimental sid
# shellcheck disable=SC2086
spec_version=$(apt-cache $PRIVATE_APT madison golang-github-opencontainers-specs-dev |
    awk -F'|' -v r="$spec_release" '{ gsub(/ /, "", $2) } index($2, r "-") == 1 { print $2; exit }')
if [ -z "$spec_version" ]; then
    echo "tests/oci/setup.sh: no Debian suite has golang-github-opencontainers-specs-dev $spec_release any more;" \
        "update oci-config.schema.json and tests/oci (the modelled runtime-spec release) to the release Debian ships" >&2
    exit 1
fi
# shellcheck disable=SC2086
(cd "$tools/debs" && apt-get $PRIVATE_APT download -qq "golang-github-opencontainers-specs-dev=$spec_version" >/dev/null)
dpkg -x "$tools"/debs/golang-github-opencontainers-specs-dev_*_all.deb "$tools/root"
mkdir -p "$tools/$schema"
cp "$tools/root/$schema"/*.json "$tools/$schema/"
rm -rf "$tools/root" "$tools/debs" "$tools/apt"
echo "$spec_version" >"$tools/version"
echo "$want" >"$tools/stamp"
echo "tests/oci/setup.sh: the runtime-spec schemas of golang-github-opencontainers-specs-dev $spec_version in $tools"
