#!/usr/bin/env bash
# Create (or bring up to date) one virtualenv per peer library under bench/.venvs/<name>,
# with the library and its database drivers pinned to the versions of
# shared/reference/peer-benchmarks.md. Safe to run again: pip only installs what differs.
#
#   bench/setup_peers.sh                  # all peers
#   bench/setup_peers.sh awa pgqueuer     # some of them
#   PYTHON=python3.11 bench/setup_peers.sh
#
# Prints the interpreter of each environment; bench/run.py finds them there by itself.
# Nothing of the peers is copied into the repository: everything comes from PyPI.
set -euo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
VENVS="$BENCH_DIR/.venvs"
# The reference measurements used CPython 3.11.7.
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}

# name -> pinned requirements (library first, then its drivers). psycopg 3.3.9 is in
# every environment, as in the reference; awa uses its own Rust driver (sqlx).
declare -A REQUIREMENTS=(
    [awa]="awa-pg==0.6.9 psycopg[binary]==3.3.9"
    [pgqueuer]="pgqueuer==1.6.0 asyncpg==0.32.0 psycopg[binary]==3.3.9"
    [procrastinate]="procrastinate==3.10.0 psycopg[binary]==3.3.9 psycopg-pool==3.3.3"
)
# name -> module that must import afterwards
declare -A MODULES=([awa]=awa [pgqueuer]=pgqueuer [procrastinate]=procrastinate)
ALL=(awa pgqueuer procrastinate)

log() { printf '== %s\n' "$*" >&2; }

names=("$@")
[ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
for name in "${names[@]}"; do
    if [ -z "${REQUIREMENTS[$name]+x}" ]; then
        echo "unknown peer '$name'; known: ${ALL[*]}" >&2
        exit 2
    fi
done

mkdir -p "$VENVS"
for name in "${names[@]}"; do
    venv="$VENVS/$name"
    if [ ! -x "$venv/bin/python" ]; then
        log "$name: creating $venv with $("$PYTHON" -V 2>&1) ($PYTHON)"
        "$PYTHON" -m venv "$venv"
    fi
    log "$name: pip install ${REQUIREMENTS[$name]}"
    # shellcheck disable=SC2086  # the requirement list is split on purpose
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
        ${REQUIREMENTS[$name]}
    "$venv/bin/python" -m pip check --disable-pip-version-check >&2
    "$venv/bin/python" -c "import ${MODULES[$name]}"
    "$venv/bin/python" -m pip freeze --disable-pip-version-check >"$venv/freeze.txt"
done

for name in "${names[@]}"; do
    printf '%s=%s\n' "$name" "$VENVS/$name/bin/python"
done
