#!/usr/bin/env bash
# Set up a Debian/Ubuntu machine to develop and test cdc. Safe to re-run: each step checks first.
#
#   - MariaDB server binaries (mariadbd, mariadb-install-db, mariadb-binlog, mariadb-dump):
#     the tests start their own throwaway servers; the system service is neither started nor used.
#   - A Java 17+ runtime for PySpark.
#   - A C compiler and Python's headers, for the C row readers (snapshot, tail) that pip builds.
#   - .venv with `pip install -e '.[test]'`, repeated only when pyproject.toml or a C source changes.
#
# Everything this script does is reported on stderr.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
STAMP="$VENV/.cdc-setup-stamp"
MIN_JAVA=17
MIN_PYTHON="3.10"

log() { printf 'setup: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

# Root runs apt-get directly; anyone else goes through sudo when there is one.
as_root() {
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root (or sudo) to run: $*"
    fi
}

# Daemons live in sbin, which is not on PATH for ordinary users.
has_program() { PATH="$PATH:/usr/sbin:/usr/local/sbin:/sbin" command -v "$1" >/dev/null 2>&1; }

java_major() {
    # `java -version` prints e.g. 'openjdk version "17.0.15"' or '"1.8.0_392"' on stderr.
    local version
    version="$(java -version 2>&1 | sed -n 's/.*version "\([^"]*\)".*/\1/p' | head -n1)"
    case "$version" in
        1.*) echo "${version#1.}" | cut -d. -f1 ;;
        "") echo 0 ;;
        *) echo "$version" | cut -d. -f1 ;;
    esac
}

has_java() { command -v java >/dev/null 2>&1 && [ "$(java_major)" -ge "$MIN_JAVA" ]; }

has_venv_module() { python3 -c 'import ensurepip, venv' >/dev/null 2>&1; }

# The snapshot's C row reader is built by pip (optional: without it the slower Python reader runs, and the
# test suite fails its native tests on purpose), so a compiler and Python's headers are set up too.
has_c_compiler() { command -v cc >/dev/null 2>&1 || command -v gcc >/dev/null 2>&1; }
has_python_headers() {
    python3 -c 'import os, sysconfig, sys; sys.exit(not os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")))' \
        >/dev/null 2>&1
}

java_package() {
    # Debian 12 / Ubuntu 22.04+ ship openjdk-17; elsewhere the distribution default may be newer.
    if apt-cache show openjdk-17-jre-headless >/dev/null 2>&1; then
        echo openjdk-17-jre-headless
    else
        echo default-jre-headless
    fi
}

apt_install() {
    # policy-rc.d exit 101 tells Debian maintainer scripts not to start services, so installing
    # mariadb-server does not start a system MariaDB on port 3306. Left alone if one exists.
    local policy=/usr/sbin/policy-rc.d made_policy=0
    if [ ! -e "$policy" ]; then
        as_root sh -c "printf '#!/bin/sh\nexit 101\n' > $policy && chmod 755 $policy"
        made_policy=1
    fi
    log "apt-get install $*"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$@" >&2 \
        || { [ "$made_policy" -eq 0 ] || as_root rm -f "$policy"; die "apt-get install $* failed"; }
    [ "$made_policy" -eq 0 ] || as_root rm -f "$policy"
}

install_system_packages() {
    local wanted=()
    has_program mariadbd && has_program mariadb-install-db || wanted+=(mariadb-server)
    has_program mariadb-binlog || wanted+=(mariadb-client)
    has_venv_module || wanted+=(python3-venv)
    has_c_compiler || wanted+=(gcc libc6-dev)
    has_python_headers || wanted+=(python3-dev)
    if [ ${#wanted[@]} -eq 0 ] && has_java; then
        log "system packages: MariaDB, Java $(java_major), python3-venv, a C compiler and Python's headers already present"
        return
    fi
    command -v apt-get >/dev/null 2>&1 || die "apt-get not found: install MariaDB server, Java $MIN_JAVA+, python3-venv, gcc and Python headers by hand"
    # Update the package lists only now that something is missing.
    log "apt-get update"
    as_root apt-get update >&2
    has_java || wanted+=("$(java_package)")
    apt_install "${wanted[@]}"
}

check_python() {
    command -v python3 >/dev/null 2>&1 || die "python3 not found: apt-get install python3"
    python3 -c "import sys; sys.exit(sys.version_info < tuple(map(int, '$MIN_PYTHON'.split('.'))))" \
        || die "cdc needs Python $MIN_PYTHON+, found $(python3 --version 2>&1)"
}

setup_venv() {
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        python3 -m venv "$VENV"
    fi
    local want
    # The C sources count too: an editable install builds the extension once, and a changed .c would
    # otherwise leave the stale build in place (the loader then falls back to the slower Python reader).
    want="$(cd "$ROOT" && cat pyproject.toml cdc/*.[ch] cdc/snapshot/*.c cdc/rows/*.[ch] cdc/spark/*.c | sha256sum | cut -d' ' -f1)"
    # Two runs at once (two terminals, CI) must not pip install into the same venv together.
    exec 9>"$VENV/.cdc-setup.lock"
    command -v flock >/dev/null 2>&1 && flock 9
    if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ]; then
        log "python packages: up to date with pyproject.toml and the C sources"
        return
    fi
    log "pip install -e '.[test]' into $VENV"
    (cd "$ROOT" && "$VENV/bin/python" -m pip install --quiet -e '.[test]' >&2)
    echo "$want" > "$STAMP"
}

main() {
    install_system_packages
    has_java || die "java $MIN_JAVA+ still not found after installing; PySpark needs it"
    check_python
    setup_venv
    log "done"
}

main "$@"
