#!/usr/bin/env bash
# Installs NVIDIA's ptxas (no GPU needed) from the pinned pip wheel `nvidia-cuda-nvcc-cu12`
# into a private virtual environment, and prints the path of the ptxas binary on stdout.
#
#   scripts/install-ptxas.sh            # venv in ${KILN_PTXAS_VENV:-$HOME/.cache/kiln/ptxas-venv}
#   export KILN_PTXAS="$(scripts/install-ptxas.sh)"
#
# The PTX tests find ptxas through $KILN_PTXAS, then PATH, then this wheel's location.
set -euo pipefail

NVCC_WHEEL_VERSION="12.8.93"
VENV="${KILN_PTXAS_VENV:-${HOME}/.cache/kiln/ptxas-venv}"
PY="${PYTHON:-python3}"

if [ ! -x "${VENV}/bin/python" ]; then
    "${PY}" -m venv "${VENV}" >&2
fi
if ! "${VENV}/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('nvidia-cuda-nvcc-cu12') != '${NVCC_WHEEL_VERSION}')" 2>/dev/null; then
    "${VENV}/bin/python" -m pip install --quiet --disable-pip-version-check \
        "nvidia-cuda-nvcc-cu12==${NVCC_WHEEL_VERSION}" >&2
fi

PTXAS="$("${VENV}/bin/python" - <<'PY'
import os
import nvidia.cuda_nvcc as m
root = m.__path__[0] if not getattr(m, "__file__", None) else os.path.dirname(m.__file__)
print(os.path.join(root, "bin", "ptxas"))
PY
)"
if [ ! -x "${PTXAS}" ]; then
    echo "install-ptxas: ${PTXAS} is missing or not executable" >&2
    exit 1
fi
"${PTXAS}" --version >&2
echo "${PTXAS}"
