#!/usr/bin/env bash
# The prepared device check (scripts/device_check.py): one call on a lent GPU machine, at most 8 minutes, or a dry
# run on this CPU. docs/benchmarks.md says how to prepare what it carries:
#   here, once:   make device-check-prepare     (.whl/: the packages the GPU image lacks; data/fashion_mnist/: the
#                                                four Fashion-MNIST files, about 30 MB)
#   device call:  command "bash scripts/device_check.sh $OUT", carry [".whl", "data/fashion_mnist"], timeout_s 540
#   dry run here: bash scripts/device_check.sh --dry-run /tmp/device_check
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ -x .venv/bin/python ] && [ -z "${PYTHON:-}" ]; then PY=.venv/bin/python; fi
if compgen -G ".whl/*.whl" > /dev/null && ! "$PY" -c "import hydra, omegaconf, typeguard" 2>/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
  export PYTHONPATH="/tmp/site:${PYTHONPATH:-}"
fi
export PYTHONPATH="$PWD/src:${PYTHONPATH:-}" PYTHONUNBUFFERED=1
if [ "${1:-}" = "--dry-run" ]; then export CLUSTERABLE_TORCH_THREADS=1 OMP_NUM_THREADS=1; fi
exec "$PY" scripts/device_check.py "$@"
