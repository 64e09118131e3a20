#!/usr/bin/env bash
# Create or update one virtual environment for working on metakit:
#
#     .ci/venv.sh DIR VERSION [EXTRAS [GROUPS]]
#     .ci/venv.sh .venv 3.11 torch,bench dev      # what `make check` uses
#     .ci/venv.sh .venv-3.12 3.12 "" test
#
# DIR is created with a CPython VERSION found on PATH (python3.12) or in
# pyenv, and gets this project installed editable with EXTRAS (pyproject's
# optional dependencies) and GROUPS (its PEP 735 dependency groups), under the
# pins of .ci/constraints.txt.  The install is redone, in place, only when
# pyproject.toml, the constraints or the arguments change; an environment
# made by an older layout is upgraded the same way.  METAKIT_TORCH=2.14.1
# pins that torch instead of CI's (`make test-torch-2.14.1`).  Prints nothing when
# there is nothing to do.  Sourced (`source .ci/venv.sh`), it only defines
# find_python and ensure_venv.

# find_python VERSION: print the path of a CPython VERSION (e.g. 3.12): from
# PATH, else from pyenv, else installed by get-python (the shared tool that
# unpacks Debian's own build with its libraries into a prefix of its own, for
# the versions this machine's Debian lacks, such as 3.14 and 3.15).  An
# interpreter must ship CPython's own test suite's `test.test_dataclasses`,
# which tests/test_cpython_dataclasses.py runs: Debian's system Pythons leave
# it to the separate libpython3.X-testsuite package, so one without it is
# passed over for the next place.  Fails if none is found.
find_python() {
    local version=$1 candidate pyenv_dir="" get_python
    if command -v pyenv >/dev/null 2>&1; then
        pyenv_dir="$(pyenv root)/versions/$(pyenv versions --bare 2>/dev/null | grep -E "^${version//./\\.}(\.[0-9]+)?$" | sort -V | tail -n 1)"
    fi
    for candidate in "python$version" "${pyenv_dir:+$pyenv_dir/bin/python}"; do
        if [ -n "$candidate" ] && is_complete_python "$candidate" "$version"; then
            command -v "$candidate"
            return 0
        fi
    done
    # The tool: METAKIT_GET_PYTHON, else get-python on PATH, else the one in
    # the shared tools beside this checkout.
    get_python="${METAKIT_GET_PYTHON:-$(command -v get-python || echo "$(dirname "${BASH_SOURCE[0]}")/../../shared/tools/get-python")}"
    if [ -x "$get_python" ]; then
        echo "--- no complete Python $version on PATH or in pyenv: installing one with get-python" >&2
        if candidate="$("$get_python" "$version")" && is_complete_python "$candidate" "$version"; then
            echo "$candidate"
            return 0
        fi
    fi
    echo "error: no Python $version with its test package (test.test_dataclasses) found on PATH, in pyenv" \
        "or by get-python ($get_python)" >&2
    return 1
}

# is_complete_python COMMAND VERSION: whether COMMAND runs CPython VERSION and
# ships test.test_dataclasses.
is_complete_python() {
    command -v "$1" >/dev/null 2>&1 &&
        "$1" -c "import sys, importlib.util as u
sys.exit(sys.version_info[:2] != tuple(map(int, '$2'.split('.'))) or u.find_spec('test.test_dataclasses') is None)" 2>/dev/null
}

# ensure_venv DIR VERSION EXTRAS GROUPS: see the top of this file.
ensure_venv() {
    local dir=$1 version=$2 extras=${3:-} groups=${4:-}
    local stamp="$dir/.metakit-installed" want python spec group constraints=.ci/constraints.txt
    local -a group_args=()
    if [ -n "${METAKIT_TORCH:-}" ]; then  # another torch than CI's: the same pins, that torch's version
        mkdir -p "$dir"
        constraints="$dir/constraints.txt"
        sed "s/^torch==.*/torch==$METAKIT_TORCH/" .ci/constraints.txt >"$constraints"
    fi
    want="$(cat pyproject.toml "$constraints" | sha256sum | cut -d' ' -f1) extras=$extras groups=$groups"
    if [ -x "$dir/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        return 0
    fi
    if [ ! -x "$dir/bin/python" ]; then
        python="$(find_python "$version")" || return 1
        echo "--- creating $dir with $("$python" --version)"
        "$python" -m venv "$dir" || return 1
    fi
    spec="."
    [ -n "$extras" ] && spec=".[$extras]"
    for group in ${groups//,/ }; do
        group_args+=(--group "$group")
    done
    echo "--- installing metakit$([ -n "$extras" ] && echo "[$extras]")${groups:+ and the groups $groups} into $dir"
    rm -f "$dir"/.metakit-installed*  # this stamp, and those of the older layout
    # --group needs pip 25.1 or later.
    "$dir/bin/python" -m pip install --quiet --upgrade "pip>=25.1" || return 1
    "$dir/bin/python" -m pip install --quiet -c "$constraints" -e "$spec" ${group_args[@]+"${group_args[@]}"} || return 1
    echo "$want" >"$stamp"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    set -euo pipefail
    cd "$(dirname "$0")/.."
    if [ $# -lt 2 ] || [ $# -gt 4 ]; then
        echo "usage: .ci/venv.sh DIR VERSION [EXTRAS [GROUPS]]" >&2
        exit 2
    fi
    ensure_venv "$@"
fi
