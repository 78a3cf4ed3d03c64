# Shared by build-image.sh and test-image.sh (sourced, not run): installs and
# configures podman idempotently, and makes the base images from Debian
# packages when no container registry can be reached.
#
# Base images. The Containerfiles take their bases as build arguments whose
# defaults are the usual public images (rust:1.95-slim-bookworm and
# debian:bookworm-slim on Docker Hub). When podman cannot pull those (no
# registry reachable, as on the project's machines), equivalent bases are
# made once from Debian's packages with debootstrap and `podman import`:
#   localhost/switchyard-base/debian:bookworm-slim   minbase, docs/man/locales removed
#   localhost/switchyard-base/rust:<ver>-slim-bookworm  the same plus gcc, libc6-dev,
#       make, cmake, python3-pip and this machine's Rust toolchain (rustc --print sysroot)
# Set SWITCHYARD_BASE=public to insist on the public images, =local to
# always use the local ones; the default (auto) tries the public ones first.

CT_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PUBLIC_RUNTIME_BASE=docker.io/library/debian:bookworm-slim
PUBLIC_BUILD_BASE=docker.io/library/rust:1.95-slim-bookworm
LOCAL_RUNTIME_BASE=localhost/switchyard-base/debian:bookworm-slim
LOCAL_BUILD_BASE=localhost/switchyard-base/rust:1.95-slim-bookworm
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

say() { printf '\033[1m[image]\033[0m %s\n' "$*"; }
die() { printf '\033[1;31m[image] %s\033[0m\n' "$*" >&2; exit 1; }

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else die "need root to run: $* (install it yourself, or run as root)"; fi
}

ct_apt_install() {
    local missing=() pkg
    for pkg in "$@"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install ${missing[*]} by hand"
    say "installing ${missing[*]} (apt)"
    as_root apt-get update -qq || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -qq "${missing[@]}" >/dev/null \
        || die "apt-get install ${missing[*]} failed"
}

# podman + runc from Debian, and the engine settings that work on these
# machines (cgroupfs, runc, no default ulimits). An existing
# containers.conf is left alone.
ct_setup_podman() {
    command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 \
        || ct_apt_install podman runc
    local conf=/etc/containers/containers.conf
    if [ ! -f "$conf" ]; then
        say "writing $conf (cgroupfs, runc, no default ulimits)"
        as_root mkdir -p /etc/containers
        printf '%s\n' '[containers]' 'default_ulimits = []' '' '[engine]' \
            'cgroup_manager = "cgroupfs"' 'runtime = "runc"' | as_root tee "$conf" >/dev/null
    fi
}

ct_image_exists() { podman image exists "$1" 2>/dev/null; }

# Debian's documentation, man pages, locales and package lists are not
# needed in an image; the same dpkg filters as the official slim images
# keep later installs small too.
ct_slim_rootfs() {
    local root="$1"
    mkdir -p "$root/etc/dpkg/dpkg.cfg.d" "$root/etc/apt/apt.conf.d"
    printf '%s\n' 'path-exclude /usr/share/doc/*' 'path-include /usr/share/doc/*/copyright' \
        'path-exclude /usr/share/man/*' 'path-exclude /usr/share/info/*' \
        'path-exclude /usr/share/locale/*' 'path-include /usr/share/locale/locale.alias' \
        'path-exclude /usr/share/lintian/*' 'path-exclude /usr/share/linda/*' \
        > "$root/etc/dpkg/dpkg.cfg.d/slim"
    printf '%s\n' 'APT::Install-Recommends "false";' 'APT::Install-Suggests "false";' \
        > "$root/etc/apt/apt.conf.d/slim"
    find "$root/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
    find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete 2>/dev/null || true
    rm -rf "$root"/usr/share/{man,info,lintian,linda}/* "$root"/var/cache/apt/*.bin \
        "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log \
        "$root"/var/cache/debconf/*-old "$root"/var/lib/dpkg/*-old
    find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
}

# debootstrap SUITE ROOT [--include=...]: a minbase Debian 12 tree.
ct_debootstrap() {
    local root="$1"; shift
    command -v debootstrap >/dev/null 2>&1 || ct_apt_install debootstrap
    say "debootstrap bookworm (minbase) into $root $*"
    as_root debootstrap --variant=minbase "$@" bookworm "$root" "$DEBIAN_MIRROR" >"$root.log" 2>&1 \
        || { tail -20 "$root.log" >&2; die "debootstrap failed (log: $root.log)"; }
    printf '%s\n' "deb $DEBIAN_MIRROR bookworm main" "deb $DEBIAN_MIRROR bookworm-updates main" \
        "deb http://deb.debian.org/debian-security bookworm-security main" > "$root/etc/apt/sources.list"
    ct_slim_rootfs "$root"
}

ct_make_runtime_base() {
    ct_image_exists "$LOCAL_RUNTIME_BASE" && return 0
    local work; work=$(mktemp -d /var/tmp/switchyard-base.XXXXXX)
    ct_debootstrap "$work/root"
    say "podman import -> $LOCAL_RUNTIME_BASE"
    tar -C "$work/root" -c . | podman import \
        --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        - "$LOCAL_RUNTIME_BASE" >/dev/null || die "podman import of the runtime base failed"
    as_root rm -rf "$work"
}

# Like rust:slim-bookworm: Rust in /usr/local/cargo (CARGO_HOME) and
# /usr/local/rustup, gcc and libc6-dev; plus what the build stage would
# otherwise install with apt (make, cmake, python3-pip), so that a build
# on a machine without a registry needs no Debian mirror either.
ct_make_build_base() {
    ct_image_exists "$LOCAL_BUILD_BASE" && return 0
    command -v rustc >/dev/null 2>&1 || die "rustc not found: the local build base copies this machine's Rust toolchain"
    local sysroot work tc
    sysroot=$(rustc --print sysroot)
    work=$(mktemp -d /var/tmp/switchyard-base.XXXXXX)
    ct_debootstrap "$work/root" --include=ca-certificates,gcc,libc6-dev,make,cmake,python3-pip
    tc="$work/root/usr/local/rustup/toolchain"
    say "copying the Rust toolchain ($(rustc --version)) from $sysroot"
    mkdir -p "$tc/bin" "$tc/lib/rustlib" "$work/root/usr/local/cargo/bin"
    cp -a "$sysroot"/bin/{cargo,rustc} "$tc/bin/"
    cp -a "$sysroot"/lib/*.so* "$tc/lib/"
    cp -a "$sysroot/lib/rustlib/x86_64-unknown-linux-gnu" "$sysroot/lib/rustlib/etc" "$tc/lib/rustlib/" 2>/dev/null \
        || cp -a "$sysroot/lib/rustlib/x86_64-unknown-linux-gnu" "$tc/lib/rustlib/"
    ln -s ../../rustup/toolchain/bin/cargo "$work/root/usr/local/cargo/bin/cargo"
    ln -s ../../rustup/toolchain/bin/rustc "$work/root/usr/local/cargo/bin/rustc"
    say "podman import -> $LOCAL_BUILD_BASE"
    tar -C "$work/root" -c . | podman import \
        --change 'ENV PATH=/usr/local/cargo/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV CARGO_HOME=/usr/local/cargo' --change 'ENV RUSTUP_HOME=/usr/local/rustup' \
        --change 'CMD ["bash"]' - "$LOCAL_BUILD_BASE" >/dev/null || die "podman import of the build base failed"
    as_root rm -rf "$work"
}

# Picks the bases: sets BUILD_BASE and RUNTIME_BASE.
ct_choose_bases() {
    local mode="${SWITCHYARD_BASE:-auto}"
    BUILD_BASE="$PUBLIC_BUILD_BASE"; RUNTIME_BASE="$PUBLIC_RUNTIME_BASE"
    if [ "$mode" = auto ]; then
        if (ct_image_exists "$PUBLIC_RUNTIME_BASE" || podman pull -q "$PUBLIC_RUNTIME_BASE" >/dev/null 2>&1) &&
           (ct_image_exists "$PUBLIC_BUILD_BASE" || podman pull -q "$PUBLIC_BUILD_BASE" >/dev/null 2>&1); then
            mode=public
        else
            say "the public base images cannot be pulled: using bases made from Debian packages"
            mode=local
        fi
    fi
    if [ "$mode" = local ]; then
        ct_make_runtime_base
        ct_make_build_base
        BUILD_BASE="$LOCAL_BUILD_BASE"; RUNTIME_BASE="$LOCAL_RUNTIME_BASE"
    fi
    say "bases: build $BUILD_BASE, runtime $RUNTIME_BASE"
}
