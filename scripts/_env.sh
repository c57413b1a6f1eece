# Creates or refreshes .venv and installs the project with its dev extras (tests, lint,
# types, docs). Re-installs only when pyproject.toml changed since the last install, so
# repeated runs are quick. Sourced by scripts/* (which set `-euo pipefail` themselves), and
# safe to source from an interactive shell: `source scripts/_env.sh` leaves the shell's
# options and directory as they were, and puts .venv/bin first on PATH.
_sharecon_env() {
    local root py stamp extras
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)" || return 1
    py="${PYTHON:-python3}"
    extras="dev${SHARECON_EXTRAS:+,$SHARECON_EXTRAS}"
    if [ ! -x "$root/.venv/bin/python" ]; then
        echo "==> creating .venv with $("$py" --version)"
        "$py" -m venv "$root/.venv" || return 1
    fi
    stamp="$root/.venv/.sharecon-installed"
    if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
        echo "==> installing sharecon[$extras] into .venv"
        "$root/.venv/bin/python" -m pip install --quiet --upgrade pip || return 1
        "$root/.venv/bin/python" -m pip install --quiet -e "$root[$extras]" || return 1
        touch "$stamp"
    fi
    SHARECON_ROOT="$root"
    export PATH="$root/.venv/bin:$PATH"
}
_sharecon_env || return 1 2>/dev/null || exit 1
unset -f _sharecon_env
