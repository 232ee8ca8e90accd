# Sourced by the setup scripts that need packages of another Debian suite (trixie, forky, sid) on this Debian 12
# machine: a private apt state, so that the system's apt configuration, lists and cache are never touched.
#
#   . scripts/debian-suites.sh
#   private_apt_state DIR SUITE...    # sets PRIVATE_APT: options for apt-get and apt-cache, lists updated
#   apt-get $PRIVATE_APT download PACKAGE/SUITE ...
#
# The archive is the one apt's own sources name for this machine's release (one-line or deb822 format, as apt
# itself reads them); a machine whose sources name none gets a clear error, never a guessed address.
# The functions share the caller's variables (POSIX sh has no locals): theirs all start with private_apt_.

debian_archive() {
    private_apt_release=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    private_apt_archive=$(
        apt-get indextargets --no-release-info --format '$(TARGET_OF) $(RELEASE) $(COMPONENT) $(REPO_URI)' 2>/dev/null |
            awk -v release="$private_apt_release" '$1 == "deb" && $2 == release && $3 == "main" { print $4; exit }'
    )
    if [ -z "$private_apt_archive" ]; then
        echo "$0: apt's sources name no Debian archive with '$private_apt_release main'; add the Debian archive to" \
            "/etc/apt/sources.list.d/ (see sources.list(5)) and run this again" >&2
        return 1
    fi
    echo "${private_apt_archive%/}"
}

private_apt_state() {
    case $1 in /*) private_apt_dir=$1 ;; *) private_apt_dir=$PWD/$1 ;; esac  # apt takes these paths as they are
    shift
    private_apt_archive=$(debian_archive) || return 1
    mkdir -p "$private_apt_dir/lists/partial" "$private_apt_dir/cache/archives/partial"
    : >"$private_apt_dir/status"
    for private_apt_suite in "$@"; do
        echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg]" \
            "$private_apt_archive $private_apt_suite main"
    done >"$private_apt_dir/sources.list"
    PRIVATE_APT="-o Dir::State::Lists=$private_apt_dir/lists -o Dir::Etc::SourceList=$private_apt_dir/sources.list
        -o Dir::Etc::SourceParts=/dev/null -o Dir::Cache=$private_apt_dir/cache
        -o Dir::State::status=$private_apt_dir/status -o APT::Sandbox::User=root -o Debug::NoLocking=1"
    echo "$0: package lists of $* from $private_apt_archive"
    # shellcheck disable=SC2086
    apt-get $PRIVATE_APT -qq update >/dev/null
}
