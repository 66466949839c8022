"""What a PRM checkpoint takes in memory, read from its config and weight headers without loading
it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgereason.backends.transformers.loader import load_config, source
from edgereason.backends.transformers.torch_device import import_torch, resolve_device


def kv_bytes_per_token(path: Path, device: str = "auto") -> int:
    """2 (keys and values) * layers * KV heads * head size * bytes of the KV dtype (bf16 on a GPU,
    fp32 on CPU)."""
    return config_kv_bytes(load_config(path), resolve_device(device)[1])


def weights_bytes(path: Path, device: str = "auto") -> int:
    """The bytes the checkpoint's weights take loaded on `device`, without loading them: every
    tensor's elements (from the safetensors headers, or a GGUF's tensor table, which transformers
    dequantizes) times the size of the dtype they load in (bf16 on a GPU, fp32 on CPU). Pickled
    `.bin` weights count at their file size."""
    import math

    src = source(path)
    size = import_torch().tensor([], dtype=resolve_device(device)[1]).element_size()
    if src.gguf_file:
        from edgereason.util.gguf_layout import read_layout

        return size * sum(t.n_elements for t in read_layout(src.folder / src.gguf_file).tensors)
    from safetensors import safe_open

    elements = 0
    for file in sorted(src.folder.glob("*.safetensors")):
        with safe_open(str(file), framework="pt") as f:
            elements += sum(math.prod(f.get_slice(k).get_shape()) for k in f.keys())
    return size * elements + sum(f.stat().st_size for f in src.folder.glob("*.bin"))


def config_kv_bytes(config: Any, dtype: Any) -> int:
    torch = import_torch()
    config = config.get_text_config(decoder=True)
    kv_heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return (
        2
        * config.num_hidden_layers
        * kv_heads
        * head_dim
        * torch.tensor([], dtype=dtype).element_size()
    )
