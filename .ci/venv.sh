# Shared by .ci/bench and .ci/check: find interpreters and keep virtual
# environments up to date.  Source it; it defines functions only.

# find_python VERSION: print the path of a CPython VERSION (e.g. 3.12), from
# PATH or from pyenv; fail if there is none.
find_python() {
    local version=$1 candidate
    for candidate in "python$version" "$(command -v pyenv >/dev/null && pyenv root)/versions/$(pyenv versions --bare 2>/dev/null | grep -E "^${version//./\\.}(\.[0-9]+)?$" | sort -V | tail -n 1)/bin/python"; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c "import sys; sys.exit(sys.version_info[:2] != tuple(map(int, '$version'.split('.'))))" 2>/dev/null; then
            command -v "$candidate"
            return 0
        fi
    done
    echo "error: no Python $version found on PATH or in pyenv" >&2
    return 1
}

# ensure_venv DIR PYTHON EXTRAS: create DIR with PYTHON if it is missing, and
# install this project in it, editable, with EXTRAS (e.g. "torch,bench").
# The install is redone only when pyproject.toml or EXTRAS change.
ensure_venv() {
    local dir=$1 python=$2 extras=$3
    local stamp="$dir/.metakit-installed-${extras//,/-}"
    local want
    want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
    if [ ! -x "$dir/bin/python" ]; then
        echo "--- creating $dir with $("$python" --version)"
        "$python" -m venv "$dir" || return 1
    fi
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        echo "--- installing metakit[$extras] into $dir"
        rm -f "$stamp"
        "$dir/bin/python" -m pip install --quiet --upgrade pip || return 1
        "$dir/bin/python" -m pip install --quiet -e ".[$extras]" || return 1
        echo "$want" > "$stamp"
    fi
}
