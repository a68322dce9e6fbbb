"""Writes the scheduler's opcode dispatch chain from the op table.

Numba's cache keys a cached function on its own file only: edits to kernels in other files
would be served stale (reference/numba-measured.md, 1.3). The generated block therefore
carries a hash of every file the compiled scheduler depends on, so any kernel edit changes
scheduler.py and invalidates its cache. ``ensure_fresh()`` runs at import and rewrites the
block when the hash is out of date; tests/test_codegen.py checks the committed file is fresh.
"""

import hashlib
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PKG = os.path.dirname(HERE)
SCHEDULER = os.path.join(HERE, "scheduler.py")
BEGIN = "# BEGIN GENERATED DISPATCH"
END = "# END GENERATED DISPATCH"


def _sources():
    kdir = os.path.join(PKG, "kernels")
    files = sorted(os.path.join(kdir, f) for f in os.listdir(kdir) if f.endswith(".py"))
    return files + [os.path.join(HERE, "tape.py"), os.path.abspath(__file__)]


def source_hash():
    h = hashlib.sha256()
    for path in _sources():
        with open(path, "rb") as fh:
            h.update(os.path.basename(path).encode() + b"\0" + fh.read())
    return h.hexdigest()[:16]


def generate(ops, digest):
    lines = [
        f"{BEGIN} (python -m nautograd.graph._codegen; do not edit by hand)",
        f"# sources hash: {digest}",
        "from ..kernels.registry import OPS as _OPS  # noqa: E402",
        "",
    ]
    live = [op for op in ops if op.backward is not None]
    for op in live:
        lines.append(f"_k{op.opcode} = _OPS[{op.opcode - 1}].backward  # {op.name}")
    # per opcode, 1 if its kernel assigns into fresh buffers (kernels/_jit.assigning) or can
    # run in parts on several threads (kernels/_jit.parallel)
    for table_name, attr in (("_ASSIGNS", "assigns"), ("_PARALLEL", "parallel")):
        table = [0] * (max((op.opcode for op in ops), default=0) + 1)
        for op in live:
            table[op.opcode] = int(getattr(op.backward, attr, False))
        bits = "".join(map(str, table))
        lines += ["", f"{table_name} = np.array(", "    list("]
        lines += [f'        "{bits[i : i + 64]}"' for i in range(0, len(bits), 64)]
        lines += ["    ),", "    np.int8,", ")"]
    lines += [
        "",
        "",
        '@numba.njit(inline="always")',
        "def _dispatch(op, f32, G64, G32, go, gi, V64, V32, so, sa, ip, fp):",
    ]
    for j, op in enumerate(live):
        kw = "if" if j == 0 else "elif"
        k = f"_k{op.opcode}"
        lines += [
            f"    {kw} op == {op.opcode}:",
            "        if f32:",
            f"            {k}(G32, G64, go, gi, V32, so, sa, ip, fp)",
            "        else:",
            f"            {k}(G64, G32, go, gi, V64, so, sa, ip, fp)",
        ]
    lines += ["", "", END]  # laid out as `ruff format` would
    return "\n".join(lines) + "\n"


def generate_lazy(ops, digest):
    """deferred.py's dispatch: opcode -> the op's compiled lazy forward (ops sharing a kernel
    share a branch, chosen through the table ``_KIND``)."""
    lines = [
        f"{BEGIN} (python -m nautograd.graph._codegen; do not edit by hand)",
        f"# sources hash: {digest}",
        "from ..kernels.registry import OPS as _OPS  # noqa: E402",
        "",
    ]
    kernels = []  # distinct forwards, in op order
    kind = [-1] * (max((op.opcode for op in ops), default=0) + 1)
    for op in ops:
        if op.lazy is None:
            continue
        f = op.lazy[1]
        if f not in kernels:
            kernels.append(f)
            lines.append(
                f"_f{len(kernels) - 1} = _inlined(_OPS[{op.opcode - 1}].lazy[1])  # {op.name}"
            )
        kind[op.opcode] = kernels.index(f)
    # (16 to a line: `ruff format` would give each entry a line of its own)
    lines += ["", "# fmt: off", "_KIND = np.array(", "    ["]
    for i in range(0, len(kind), 16):
        lines.append("        " + ", ".join(str(x) for x in kind[i : i + 16]) + ",")
    lines += ["    ],", "    np.int64,", ")", "# fmt: on"]
    lines += [
        "",
        "",
        '@numba.njit(inline="always")',
        "def _fdispatch(op, S, xo, xn, k, top, ip, fp, oo, on):",
        "    f = _KIND[op]",
    ]
    for j in range(len(kernels)):
        kw = "if" if j == 0 else "elif"
        lines += [f"    {kw} f == {j}:", f"        return _f{j}(S, xo, xn, k, top, ip, fp, oo, on)"]
    lines += ["    return 0", "", "", END]
    return "\n".join(lines) + "\n"


DEFERRED = os.path.join(HERE, "deferred.py")
_TARGETS = ((SCHEDULER, generate), (DEFERRED, generate_lazy))


def is_fresh():
    mark = f"# sources hash: {source_hash()}"
    for path, _ in _TARGETS:
        with open(path) as fh:
            if mark not in fh.read():
                return False
    return True


def write():
    from ..kernels import OPS

    digest = source_hash()
    changed = False
    for path, gen in _TARGETS:
        with open(path) as fh:
            text = fh.read()
        head, rest = text.split(BEGIN, 1)
        _, tail = rest.split(END, 1)
        new = head + gen(OPS, digest) + tail.lstrip("\n")
        if new != text:
            with open(path, "w") as fh:
                fh.write(new)
            changed = True
    return changed


def ensure_fresh():
    """Regenerate the dispatch block if any kernel source changed since it was written."""
    if is_fresh():
        return
    if not all(os.access(path, os.W_OK) for path, _ in _TARGETS):
        raise RuntimeError(
            f"nautograd: {SCHEDULER} or {DEFERRED} is out of date with its kernels and not "
            "writable; "
            "run `python -m nautograd.graph._codegen` in a writable checkout"
        )
    write()
    flush_cached([m for name, m in sys.modules.items() if name.startswith("nautograd.kernels.")])


def flush_cached(modules):
    """Empty the Numba cache of every cached function defined in ``modules``.

    The kernel modules' own cached functions (a convolution's forward, batched products) call
    compiled code of other files too (kernels/_gemm.py's products) and would be served stale
    after an edit there, as the scheduler would without its hash; a kernel source change
    therefore recompiles them as well. Returns how many were flushed."""
    from numba.core.dispatcher import Dispatcher

    flushed = 0
    for module in modules:
        for value in list(vars(module).values()):
            if isinstance(value, Dispatcher) and value.py_func.__module__ == module.__name__:
                if type(value._cache).__name__ != "NullCache":  # (cache=True)
                    value._cache.flush()
                    flushed += 1
    return flushed


if __name__ == "__main__":
    changed = write()
    print("dispatch", "rewritten" if changed else "already fresh", file=sys.stderr)
