"""The bad-input fuzzer: every op of the table on inputs its cases do not cover.

Each example starts from one of an op's cases and breaks it one way: a wrong shape or rank, a
zero-size dimension, another dtype, a non-contiguous or read-only array, a 0-d input, an
out-of-range dim or index. nautograd must answer with a clear Python exception (RuntimeError,
ValueError, TypeError, IndexError, NotImplementedError, raised outside Numba) or with torch's
result: the same shape, values and gradients where torch gives a result too. (Where torch
raises and nautograd computes something, nothing is compared: nautograd accepts more, e.g.
negative slice steps.)

Run as a program (``python tests/fuzz_bad_inputs.py [--examples N] [--ops a,b] [--log FILE]``)
so that a crash ends only that process: ``tests/test_bad_input_fuzzer.py`` starts it and
fails on a non-zero exit, naming the example in flight from the log. Uses hypothesis to
draw the examples (derandomized: a run is reproducible).
"""

import argparse
import os
import sys
import traceback
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
from op_cases import TORCH  # noqa: E402

import nautograd as ng  # noqa: E402
from nautograd.kernels import OPS  # noqa: E402
from nautograd.kernels.registry import COMPOSITES, Case, run_case  # noqa: E402

F = torch.nn.functional
CLEAR = (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError)
DTYPES = [np.int64, np.int32, np.uint8, np.bool_, np.float32, np.float16]
MUTATIONS = ["shape", "rank", "empty", "dtype", "noncontiguous", "readonly", "zero_d", "kwarg"]


class Failure(Exception):
    pass


def _clear(e):
    """Whether ``e`` is an exception a user can read: a plain Python error, not from Numba's
    compiler and not an internal assertion."""
    if not isinstance(e, CLEAR):
        return False
    if type(e).__module__.startswith("numba"):
        return False
    text = str(e)
    return "nopython" not in text and "internal error" not in text


def _mutate(draw, arrays, kwargs):
    """One broken copy of a case's inputs; returns (arrays, kwargs, description)."""
    kind = draw(st.sampled_from(MUTATIONS))
    arrays = list(arrays)
    kwargs = dict(kwargs)
    slots = [i for i, a in enumerate(arrays) if isinstance(a, np.ndarray)]
    if kind == "kwarg":
        keys = [k for k, v in kwargs.items() if isinstance(v, (int, tuple, list, np.ndarray))]
        if not keys:
            kind = "shape"
        else:
            k = draw(st.sampled_from(sorted(keys)))
            v = kwargs[k]
            if isinstance(v, bool):
                kwargs[k] = 7
            elif isinstance(v, int):
                kwargs[k] = draw(st.sampled_from([v + 5, -v - 6, 100, -100]))
            elif isinstance(v, np.ndarray) and v.dtype.kind in "iu":
                kwargs[k] = v + draw(st.sampled_from([50, -50]))
            elif isinstance(v, np.ndarray):
                kwargs[k] = v[..., :1] if v.ndim else v.reshape(1, 1)
            elif isinstance(v, (tuple, list)):
                kwargs[k] = type(v)(list(v)[:-1]) if len(v) > 1 else type(v)([*v, *v, 1])
            return arrays, kwargs, f"kwarg {k}={kwargs[k]!r}"
    if not slots:
        return arrays, kwargs, "unchanged"
    i = draw(st.sampled_from(slots))
    a = arrays[i]
    if kind == "shape" and a.ndim:
        d = draw(st.integers(0, a.ndim - 1))
        shape = list(a.shape)
        shape[d] = draw(st.sampled_from([1, shape[d] + 1, 2 * shape[d] + 3]))
        a = np.resize(a, shape)
    elif kind == "rank":
        shape = list(a.shape)
        if shape and draw(st.booleans()):
            shape.pop(draw(st.integers(0, len(shape) - 1)))
        else:
            shape.insert(draw(st.integers(0, len(shape))), draw(st.sampled_from([1, 2])))
        a = np.resize(a, shape)
    elif kind == "empty" and a.ndim:
        shape = list(a.shape)
        shape[draw(st.integers(0, a.ndim - 1))] = 0
        a = np.zeros(shape, a.dtype)
    elif kind == "dtype":
        dtype = draw(st.sampled_from(DTYPES))
        a = (a * 3).astype(dtype) if dtype is not np.bool_ else a > 0
    elif kind == "noncontiguous" and a.ndim:
        big = np.zeros((*a.shape, 2), a.dtype)
        big[..., 1] = a
        a = big[..., 1]
    elif kind == "readonly":
        a = a.copy()
        a.flags.writeable = False
    elif kind == "zero_d":
        a = np.asarray(a.reshape(-1)[0] if a.size else 0.5, a.dtype)
    arrays[i] = a
    return arrays, kwargs, f"{kind} of input {i}: {a.dtype} {a.shape}"


def _tensors(lib, arrays):
    out = []
    for a in arrays:
        if not isinstance(a, np.ndarray):
            out.append(a)
        elif lib is ng:  # (from_numpy: the layout and read-only flag reach nautograd)
            t = ng.from_numpy(a)
            out.append(t.requires_grad_() if a.dtype in (np.float32, np.float64) else t)
        else:
            t = torch.tensor(a.copy())  # (not ascontiguousarray: it makes a 0-d array 1-d)
            out.append(t.requires_grad_() if t.is_floating_point() else t)
    return out


def _kwargs(lib, kwargs):
    kw = {}
    for k, v in kwargs.items():
        if isinstance(v, np.ndarray):
            v = ng.tensor(v) if lib is ng else torch.tensor(v)
        elif lib is torch and isinstance(v, list):
            v = torch.tensor(np.asarray(v))
        if lib is torch and k == "dtype":
            v = getattr(torch, np.dtype(v).name)
        kw[k] = v
    return kw


def _call(op, case, inputs, kw):
    """The op as its public function runs it: through its frontend (``op.api``) if it has
    one (clamp's tensor bounds, square's bool), else ``apply``."""
    if op.api is None or op.composite:
        return run_case(op, case, ng.tensor_apply, inputs, kw)
    args = (inputs,) if op.nin == -1 else inputs
    if case.call is not None:
        return case.call(lambda *a, **k: op.api(ng.tensor_apply, *a, **k), *args, **kw)
    return op.api(ng.tensor_apply, *args, **kw)


def _torch_call(op, case, inputs, kw):
    f = TORCH.get(op.name) or getattr(torch, op.name, None) or getattr(F, op.name)
    if op.nn_functional and op.name not in TORCH:
        f = getattr(F, op.name)
    if case.call is not None:
        return case.call(f, *inputs, **kw)
    return f(*inputs, **kw)


def _outputs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _compare(what, ours, ref):
    a = np.asarray(ours.detach().numpy(), dtype=np.float64)
    b = ref.detach().numpy().astype(np.float64)
    if ours.dtype == np.float64 and ref.dtype == torch.float32:
        # an integer input promoted to the default dtype: float64 here, float32 in torch
        # (its overflow to inf included)
        a = a.astype(np.float32).astype(np.float64)
    if a.shape != b.shape:
        raise Failure(f"{what}: shape {a.shape}, torch {b.shape}")
    kind = {"b": "b", "u": "i", "i": "i", "f": "f"}
    if kind[ours.dtype.kind] != kind[np.dtype(str(ref.dtype).removeprefix("torch.")).kind]:
        raise Failure(f"{what}: dtype {ours.dtype}, torch {ref.dtype}")
    tol = 1e-3 if ours.dtype != np.float64 or ref.dtype != torch.float64 else 1e-7
    if not np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
        raise Failure(f"{what}: values differ from torch's (max |diff| {np.nanmax(abs(a - b))})")


def check(op, case, arrays, kwargs):
    """One example: a clear exception from nautograd, or torch's result."""
    inputs = _tensors(ng, arrays)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ours = _call(op, case, inputs, _kwargs(ng, kwargs))
    except Exception as e:
        if _clear(e):
            return "raised"
        raise Failure(f"unclear exception {type(e).__module__}.{type(e).__name__}: {e}") from e
    ref_inputs = _tensors(torch, arrays)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref = _torch_call(op, case, ref_inputs, _kwargs(torch, kwargs))
    except Exception:
        return "torch raised"
    ours_out, ref_out = _outputs(ours), _outputs(ref)
    if len(ours_out) != len(ref_out):
        raise Failure(f"{len(ours_out)} outputs, torch {len(ref_out)}")
    for k, (a, b) in enumerate(zip(ours_out, ref_out, strict=True)):
        _compare(f"output {k}", a, b)
    diff = [(a, b) for a, b in zip(ours_out, ref_out, strict=True) if b.requires_grad]
    leaves = [t for t in inputs if isinstance(t, ng.Tensor) and t.requires_grad]
    ref_leaves = [t for t in ref_inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    if not diff or not leaves or len(leaves) != len(ref_leaves):
        return "same"
    for k, (a, b) in enumerate(diff):
        if not a.requires_grad and _torch_gradient_is_nonzero(b, ref_leaves):
            raise Failure(f"output {k} requires grad in torch (a nonzero gradient), not here")
    diff = [(a, b) for a, b in diff if a.requires_grad]
    if not diff:
        return "same"
    cot = [np.linspace(-1.0, 1.0, max(b.numel(), 1))[: b.numel()].reshape(b.shape) for _, b in diff]
    try:
        grads = ng.autograd.grad(
            [a for a, _ in diff],
            leaves,
            [ng.tensor(c.astype(a.dtype)) for c, (a, _) in zip(cot, diff, strict=True)],
            allow_unused=True,
        )
    except Exception as e:
        if _clear(e):
            raise Failure(f"backward raised where torch's works: {e}") from e
        raise Failure(f"backward: unclear exception {type(e).__name__}: {e}") from e
    try:
        ref_grads = torch.autograd.grad(
            [b for _, b in diff],
            ref_leaves,
            [torch.tensor(c, dtype=b.dtype) for c, (_, b) in zip(cot, diff, strict=True)],
            allow_unused=True,
        )
    except Exception:
        return "torch's backward raised"
    for k, (g, t) in enumerate(zip(grads, ref_grads, strict=True)):
        if t is None:
            if g is not None and np.any(g.numpy()):
                raise Failure(f"gradient {k}: nonzero where torch's is None")
            continue
        if g is None:
            if np.any(t.numpy()):
                raise Failure(f"gradient {k}: None where torch's is nonzero")
            continue
        if str(g.dtype) != str(t.dtype).removeprefix("torch."):
            raise Failure(f"gradient {k}: dtype {g.dtype}, torch {t.dtype}")
        _compare(f"gradient {k}", g, t)
    return "same"


def _torch_gradient_is_nonzero(out, leaves):
    """Whether torch's ``out`` carries a nonzero gradient to ``leaves`` (slogdet's sign
    requires grad in torch, with a zero gradient; here it does not require grad)."""
    try:
        grads = torch.autograd.grad(out.sum(), leaves, allow_unused=True, retain_graph=True)
    except Exception:
        return False
    return any(g is not None and bool(g.abs().sum() > 0) for g in grads)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=8, help="examples per op")
    parser.add_argument("--ops", default="", help="comma-separated op names (default: all)")
    parser.add_argument("--log", default=None, help="file naming each example before it runs")
    args = parser.parse_args(argv)
    wanted = set(filter(None, args.ops.split(",")))
    ops = [op for op in OPS + COMPOSITES if op.cases and (not wanted or op.name in wanted)]
    log = open(args.log, "w", buffering=1) if args.log else None  # noqa: SIM115
    failures = []
    counts = {}

    for op in ops:
        _fuzz(op, args.examples, log, failures, counts)
    print("outcomes:", dict(sorted(counts.items())))
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


def _fuzz(op, examples, log, failures, counts):
    """Draw ``examples`` broken inputs for ``op`` and check each."""

    @settings(
        max_examples=examples,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def run(data):
        k = data.draw(st.integers(0, len(op.cases) - 1))
        case = op.cases[k]
        seed = data.draw(st.integers(0, 2**16))
        arrays, kwargs = case.make_inputs(np.random.default_rng(seed))
        arrays, kwargs, what = _mutate(data.draw, arrays, kwargs)
        line = f"{op.name} case {k} seed {seed}: {what}"
        if log:
            log.write(line + "\n")
        try:
            outcome = check(op, Case(case.shapes, call=case.call), arrays, kwargs)
        except Failure as e:
            failures.append(f"{line}: {e}")
            outcome = "failed"
        except Exception as e:  # a bug of the fuzzer itself
            failures.append(f"{line}: fuzzer error {traceback.format_exc(limit=3)}")
            outcome = f"error {type(e).__name__}"
        counts[outcome] = counts.get(outcome, 0) + 1

    run()


if __name__ == "__main__":
    sys.exit(main())
