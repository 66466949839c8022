"""Fused passes: the decoder's layer compiled by torch.compile (inductor: Triton kernels on CUDA,
C++ on a CPU).

What is compiled is `layer.block`, one decoder layer from its input to its output with its attention
(the KV write, the gather of the sequences' cells, SDPA): about 10 kernels a layer where the layer
run op by op launches about 20. The layer's weights and cache are its arguments, not constants, so
one compiled copy serves every layer of a model: a compile traces one layer, not 28. Its shapes are
dynamic in the rows, query slots and table width, so a few compiles (a prefill, one row, several
rows of one token, an eager pass of both with one sequence or several in each group; the graphs'
passes, without a token tensor, their own) serve every bucket of the CUDA graphs: dynamo still
specializes a size of 1 (TORCH_LOGS=recompiles names the guards), and no other size. The graphs
record the compiled kernels (a graph's warm-up pass compiles, its capture records). The sampler
stays outside, recorded op by op in the same graph: inductor does not compile its scan over a 152k
vocabulary.

Off unless EDGEREASON_COMPILE=1. Compiled layers make a decode pass faster, but every process pays
for tracing and compiling before its searches, its kernels cached or not: a one-shot command loses,
and a long bench gains too little to make it the default (docs/results.md, "Fused passes"). Where
compiling fails (no Triton, an inductor error), one line says so and the passes run uncompiled.
Inductor's caches live in $EDGEREASON_HOME/torch/inductor-<torch version>; a cache that fails to
load is removed and made anew, and another torch version's is removed. compile_cache.py carries
what a process compiled to the next as torch's cache artifacts.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TypeVar

import torch
from torch.nn.attention import sdpa_kernel

from edgereason.backends.torch.attention import SDPA_BACKENDS, LayerAttention
from edgereason.backends.torch.gguf_weights import ModelConfig
from edgereason.backends.torch.layer import Layer, block
from edgereason.backends.torch.paged_decode import PagedDecodeAttention
from edgereason.errors import ConfigError
from edgereason.util import startup
from edgereason.util.files import cache_home

T = TypeVar("T")
SWITCH = "EDGEREASON_COMPILE"
# compiled copies kept per function: a few per model (one row or several, one context's cache)
RECOMPILES = 64

_off: list[str] = []  # why compiling was turned off in this process (said once)


def enabled() -> bool:
    """Whether this process's passes run compiled (on any device: the CPU tests compile too)."""
    if _off:
        return False
    flag = os.environ.get(SWITCH, "").strip()
    if flag not in ("", "0", "1"):
        raise ConfigError(
            f"{SWITCH}={flag!r}: set it to 1 (compile the passes) or 0 (run them uncompiled)"
        )
    return flag == "1"


def cache_dir() -> Path:
    return cache_home() / "torch" / f"inductor-{torch.__version__}"


def use_cache_dir() -> None:
    """Inductor's and Triton's caches under $EDGEREASON_HOME, unless the user chose a folder;
    another torch version's caches there are removed (its kernels would never be read again).
    Importing torch._dynamo sets TORCHINDUCTOR_CACHE_DIR to torch's default folder in /tmp: that
    one is not the user's choice."""
    from torch._inductor.runtime.cache_dir_utils import default_cache_dir

    chosen = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if chosen is not None and Path(chosen).resolve() != Path(default_cache_dir()).resolve():
        return
    folder = cache_dir()
    for old in folder.parent.glob("inductor-*"):
        if old != folder:
            shutil.rmtree(old, ignore_errors=True)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(folder)
    os.environ.setdefault("TRITON_CACHE_DIR", str(folder / "triton"))


def run_block(
    x: torch.Tensor,
    layer: Layer,
    cos: torch.Tensor,
    sin: torch.Tensor,
    attend: LayerAttention | PagedDecodeAttention,
    cfg: ModelConfig,
) -> torch.Tensor:
    """layer.block, compiled. The sizes that vary from pass to pass or context to context (tokens,
    sequences, query slots, table width, the cache's cells) are marked dynamic; the rest (the
    model's widths and heads) stay constants of the kernels."""
    _time_compiles()
    for t in (x, cos, sin):
        torch._dynamo.maybe_mark_dynamic(t, 0)
    attend.mark_dynamic()
    with sdpa_kernel(SDPA_BACKENDS):  # traced with the eager layer's kernels (attention.py)
        return _compiled_block()(x, layer, cos, sin, attend, cfg)


def _time_compiles() -> None:
    """Dynamo's compiles timed as the start-up's `compiles` phase (util/startup.py); hooked again
    after torch._dynamo.reset(), which drops its hooks."""
    hooks = torch._dynamo.callback_handler
    if _compile_began not in hooks.start_callbacks:
        hooks.register_start_callback(_compile_began)
        hooks.register_end_callback(_compile_ended)


def _compile_began(_: object) -> None:
    startup.enter("compiles")


def _compile_ended(_: object) -> None:
    startup.leave("compiles")


@lru_cache(maxsize=1)
def _compiled_block() -> Callable[..., torch.Tensor]:
    """The whole layer one graph (fullgraph: a break would launch the rest op by op)."""
    use_cache_dir()
    config = torch._dynamo.config
    config.recompile_limit = max(config.recompile_limit, RECOMPILES)
    config.accumulated_recompile_limit = max(config.accumulated_recompile_limit, 4 * RECOMPILES)
    config.automatic_dynamic_shapes = False  # only the sizes run_block marks vary
    shapes = torch.fx.experimental._config
    # sizes that happen to be equal (a table's width and an input's offset in its buffer) are not
    # the same size
    shapes.use_duck_shape = False
    # a size of 1 is not specialized: one row is a bucket like the others
    shapes.backed_size_oblivious = True
    return torch.compile(block, fullgraph=True)


def is_compile_error(e: BaseException) -> bool:
    """An error of compiling (dynamo, inductor, a missing or broken Triton), not of running the
    pass."""
    from torch._dynamo.exc import TorchDynamoException
    from torch._inductor.exc import InductorError

    return isinstance(e, TorchDynamoException | InductorError)


def first_run(run: Callable[[], T]) -> T:
    """The first run of a pass that compiles (a graph's warm-up): where compiling fails, the cache
    is removed and the compile tried once more (a damaged cache), then the passes run uncompiled,
    said in one line. Out of memory while compiling is out of memory (the caller's message names
    --gpu-memory), not a compile error."""
    try:
        return run()
    except Exception as e:  # noqa: BLE001 - _compile_failure raises anything else again
        first = _compile_failure(e)
    shutil.rmtree(os.environ.get("TORCHINDUCTOR_CACHE_DIR", cache_dir()), ignore_errors=True)
    torch._dynamo.reset()
    try:
        return run()
    except Exception as e:  # noqa: BLE001
        _compile_failure(e)
    turn_off(first)
    return run()


def _compile_failure(e: Exception) -> Exception:
    """`e` where it is a compile error; anything else is raised again, and the out-of-memory error a
    compile error wraps is raised as that."""
    if not is_compile_error(e):
        raise e
    if (oom := _out_of_memory(e)) is not None:
        raise oom from None
    return e


def _out_of_memory(e: BaseException) -> torch.OutOfMemoryError | None:
    """The out-of-memory error a compile error wraps, if any."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, torch.OutOfMemoryError):
            return e
        seen.add(id(e))
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return None


def turn_off(e: BaseException) -> None:
    reason = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    _off.append(reason)
    print(
        "edgereason: the torch backend's passes run uncompiled (compiling failed: "
        f"{reason[:300]}); {SWITCH}=0 skips the attempt",
        file=sys.stderr,
    )
