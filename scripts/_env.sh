# Sourced by scripts/*: creates or refreshes .venv and installs the project with its dev extras.
# Re-installs only when pyproject.toml changed since the last install, so repeated runs are quick.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
PY="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    echo "==> creating .venv with $($PY --version)"
    "$PY" -m venv .venv
fi
STAMP=.venv/.sharecon-installed
if [ ! -f "$STAMP" ] || [ pyproject.toml -nt "$STAMP" ]; then
    echo "==> installing sharecon[dev${SHARECON_EXTRAS:+,$SHARECON_EXTRAS}] into .venv"
    .venv/bin/python -m pip install --quiet --upgrade pip
    .venv/bin/python -m pip install --quiet -e ".[dev${SHARECON_EXTRAS:+,$SHARECON_EXTRAS}]"
    touch "$STAMP"
fi
export PATH="$ROOT/.venv/bin:$PATH"
