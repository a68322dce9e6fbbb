"""Devices (CPU accepted, CUDA refused as torch without CUDA), the default dtype, and the
small torch helpers programs use (rand_like, allclose, is_tensor, new_*, uniform_, ...)."""

import pickle

import numpy as np
import pytest
import torch

import nautograd as ng


def test_device_objects_behave_as_torch():
    for spec in ("cpu", "cpu:0", "cuda:1", "mps"):
        assert str(ng.device(spec)) == str(torch.device(spec))
        assert repr(ng.device(spec)) == repr(torch.device(spec))
    assert ng.device("cpu", 0) == ng.device("cpu:0")
    assert ng.device("cpu") != ng.device("cpu:0")
    assert ng.device("cpu") != "cpu"  # (as torch)
    assert ng.device("cpu").type == "cpu" and ng.device("cpu").index is None
    assert pickle.loads(pickle.dumps(ng.device("cpu:0"))) == ng.device("cpu:0")
    for bad in ("foo", "cpu:x"):
        with pytest.raises(RuntimeError) as ours:
            ng.device(bad)
        with pytest.raises(RuntimeError) as theirs:
            torch.device(bad)
        assert str(ours.value) == str(theirs.value)


@pytest.mark.parametrize(
    "make",
    [
        lambda lib, d: lib.zeros(2, 3, device=d),
        lambda lib, d: lib.ones(2, device=d),
        lambda lib, d: lib.empty(2, device=d),
        lambda lib, d: lib.full((2,), 1.0, device=d),
        lambda lib, d: lib.arange(3, device=d),
        lambda lib, d: lib.linspace(0, 1, 5, device=d),
        lambda lib, d: lib.eye(2, device=d),
        lambda lib, d: lib.rand(2, device=d),
        lambda lib, d: lib.randn(2, device=d),
        lambda lib, d: lib.randint(0, 5, (3,), device=d),
        lambda lib, d: lib.tensor([1.0], device=d),
        lambda lib, d: lib.zeros_like(lib.ones(2), device=d),
        lambda lib, d: lib.randn_like(lib.ones(2), device=d),
    ],
)
def test_creation_accepts_the_cpu_and_refuses_cuda_as_torch(make):
    for d in ("cpu", ng.device("cpu"), None):
        t = make(ng, d)
        assert t.device == ng.device("cpu")
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        make(ng, "cuda")
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        make(torch, "cuda")
    with pytest.raises(RuntimeError, match="CPU only"):
        make(ng, "mps")


def test_tensor_device_moves_are_no_ops_on_the_cpu():
    x = ng.ones(3, requires_grad=True)
    assert x.cpu() is x and x.to("cpu") is x and x.to(ng.device("cpu")) is x
    assert not x.is_cuda and x.is_cpu
    y = x.to("cpu", ng.float32)
    assert y.dtype == ng.float32 and y.requires_grad
    y.sum().backward()
    assert x.grad.dtype == ng.float64 and x.grad.tolist() == [1.0, 1.0, 1.0]
    assert x.to(x) is x and x.to(copy=True) is not x
    assert x.to(ng.ones(1, dtype=ng.float32)).dtype == ng.float32
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        x.cuda()
    with pytest.raises(AssertionError, match="not compiled with CUDA"):
        x.to("cuda")
    assert ng.cuda.is_available() is torch.cuda.is_available() is False
    assert ng.cuda.device_count() == 0


def test_set_default_dtype_changes_python_floats_and_creation():
    assert ng.get_default_dtype() == ng.float64
    try:
        ng.set_default_dtype(ng.float32)
        assert ng.tensor(1.0).dtype == ng.float32
        assert ng.zeros(2).dtype == ng.float32
        assert ng.linspace(0, 1, 3).dtype == ng.float32
        assert ng.arange(0.0, 1.0, 0.5).dtype == ng.float32
        assert ng.nn.Linear(2, 2).weight.dtype == ng.float32
        assert (ng.tensor([1, 2]) / 2).dtype == ng.float32
        assert repr(ng.tensor([1.5])) == "tensor([1.5000])"
    finally:
        ng.set_default_dtype(ng.float64)
    assert ng.tensor(1.0).dtype == ng.float64
    with pytest.raises(TypeError, match="only floating-point types"):
        ng.set_default_dtype(ng.int64)


def test_random_like_and_in_place_random_fills():
    ng.manual_seed(3)
    x = ng.zeros(1000)
    assert (
        ng.rand_like(x).shape == (1000,) and ng.randn_like(x, dtype=ng.float32).dtype == ng.float32
    )
    x.uniform_(-2, 3)
    assert x.numpy().min() >= -2 and x.numpy().max() < 3 and x.numpy().std() > 1
    x.normal_(5.0, 0.1)
    assert abs(x.numpy().mean() - 5.0) < 0.05
    w = ng.zeros(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        w.uniform_()
    with ng.no_grad():
        w.normal_()
    assert w.requires_grad and w.numpy(force=True).any()


def test_small_helpers_match_torch():
    a = np.array([1.0, 2.0, 3.0])
    b = a + 1e-9
    assert ng.allclose(ng.tensor(a), ng.tensor(b)) == torch.allclose(
        torch.tensor(a), torch.tensor(b)
    )
    assert ng.isclose(ng.tensor(a), ng.tensor(a + 1)).tolist() == [False] * 3
    assert ng.equal(ng.tensor(a), ng.tensor(a)) and not ng.equal(ng.tensor(a), ng.tensor(b))
    assert ng.is_tensor(ng.tensor(a)) and not ng.is_tensor(a)
    assert ng.numel(ng.zeros(2, 3)) == 6
    assert ng.is_floating_point(ng.zeros(1)) and not ng.is_floating_point(
        ng.zeros(1, dtype=ng.int64)
    )
    assert ng.pi == torch.pi and ng.e == torch.e and ng.inf == float("inf")
    x = ng.ones(2, dtype=ng.float32)
    assert x.new_zeros(3).dtype == ng.float32 and x.new_ones((2, 2)).shape == (2, 2)
    assert x.new_full((2,), 7).tolist() == [7.0, 7.0]
    assert x.new_tensor([1, 2]).dtype == ng.float32
    assert ng.ones(2, dtype=ng.int64).type_as(x).dtype == ng.float32


def test_non_recorded_in_place_updates_match_torch():
    a, t1, t2 = (np.random.default_rng(0).standard_normal(4) for _ in range(3))
    t2 = np.abs(t2) + 0.5
    for name, args in [("addcmul_", (t1, t2)), ("addcdiv_", (t1, t2)), ("lerp_", (t1, 0.3))]:
        x, y = ng.tensor(a), torch.tensor(a)
        getattr(x, name)(*(ng.tensor(v) if isinstance(v, np.ndarray) else v for v in args),
                         value=0.5) if name != "lerp_" else x.lerp_(ng.tensor(t1), 0.3)  # fmt: skip
        getattr(y, name)(*(torch.tensor(v) if isinstance(v, np.ndarray) else v for v in args),
                         value=0.5) if name != "lerp_" else y.lerp_(torch.tensor(t1), 0.3)  # fmt: skip
        np.testing.assert_allclose(x.numpy(), y.numpy(), rtol=1e-14)
    x = ng.tensor(a)
    x.clamp_(-0.5, 0.5)
    assert x.numpy().max() <= 0.5 and x.numpy().min() >= -0.5
    with pytest.raises(RuntimeError, match="At least one of 'min' or 'max'"):
        x.clamp_()
    x = ng.tensor(np.abs(a))
    x.sqrt_()
    np.testing.assert_allclose(x.numpy(), np.sqrt(np.abs(a)))


@pytest.mark.parametrize(
    "f",
    [
        lambda lib, a, b: a @ b,
        lambda lib, a, b: lib.mm(a, b),
        lambda lib, a, b: lib.nn.functional.linear(a, b),
        lambda lib, a, b: lib.nn.functional.linear(a, a, b[0]),
        lambda lib, a, b: lib.dot(a[0], b[0]),
    ],
)
def test_products_of_two_dtypes_raise_instead_of_promoting(f):
    a, b = ng.ones(2, 2), ng.ones(2, 2, dtype=ng.float32)
    with pytest.raises(RuntimeError, match="same dtype"):
        f(ng, a, b)
    with pytest.raises(RuntimeError, match="same dtype"):
        f(torch, torch.ones(2, 2, dtype=torch.float64), torch.ones(2, 2))
    assert (ng.ones(2, 2, dtype=ng.int64) @ ng.ones(2, 2, dtype=ng.int64)).dtype == ng.int64


def test_view_as_and_the_legacy_variable_match_torch():
    from torch.autograd import Variable as TorchVariable

    x = ng.tensor(np.arange(6.0), requires_grad=True)
    y = x.view_as(ng.zeros(2, 3))
    assert y.shape == torch.ones(6).view_as(torch.zeros(2, 3)).shape
    (y * ng.tensor(np.arange(6.0).reshape(2, 3))).sum().backward()
    assert x.grad.tolist() == list(np.arange(6.0))
    v = ng.autograd.Variable(ng.ones(2), requires_grad=True)
    tv = TorchVariable(torch.ones(2), requires_grad=True)
    assert v.requires_grad == tv.requires_grad and v.is_leaf == tv.is_leaf
    assert isinstance(ng.ones(1), ng.autograd.Variable) and isinstance(v, ng.Tensor)
    assert not isinstance(np.ones(1), ng.autograd.Variable)
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        ng.autograd.Variable(3)


def test_tensor_type_without_argument_returns_torch_type_name():
    for name in ("float32", "float64", "float16", "int64", "int32", "int16", "int8", "uint8"):
        x, t = ng.zeros(2, dtype=getattr(ng, name)), torch.zeros(2, dtype=getattr(torch, name))
        assert x.type() == t.type()
    assert ng.zeros(2, dtype=ng.bool).type() == torch.zeros(2, dtype=torch.bool).type()
    assert ng.zeros(2).type("torch.FloatTensor").dtype == ng.float32
    with pytest.raises(ValueError, match=r"invalid type: 'torch.Foo'"):
        ng.zeros(2).type("torch.Foo")


def test_legacy_tensor_types_make_and_recognise_tensors_of_their_dtype_as_torch():
    def run(lib):
        return [
            str(lib.FloatTensor([1, 2]).dtype).removeprefix("torch."),
            tuple(lib.FloatTensor(2, 3).shape),
            tuple(lib.DoubleTensor(lib.Size([2, 2])).shape),
            tuple(lib.FloatTensor().shape),
            isinstance(lib.zeros(2, dtype=lib.float32), lib.FloatTensor),
            isinstance(lib.zeros(2, dtype=lib.float64), lib.FloatTensor),
            isinstance(lib.zeros(2, dtype=lib.float64), lib.DoubleTensor),
            lib.LongTensor([1.7, -2.2]).tolist(),
            lib.BoolTensor([1, 0]).tolist(),
            lib.ByteTensor([3]).tolist(),
        ]

    assert run(ng) == run(torch)
    with pytest.raises(TypeError):
        ng.FloatTensor(ng.zeros(2, dtype=ng.float64))


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 4), (2, 3, 4, 5)])
def test_softmax_without_dim_picks_torchs_implicit_dim_with_its_warning(name, shape):
    x = np.random.default_rng(0).standard_normal(shape)
    with pytest.warns(UserWarning, match=f"Implicit dimension choice for {name} has been"):
        mine = getattr(ng.nn.functional, name)(ng.tensor(x)).numpy()
    with pytest.warns(UserWarning):
        theirs = getattr(torch.nn.functional, name)(torch.tensor(x)).numpy()
    np.testing.assert_allclose(mine, theirs, rtol=1e-12)
    typed = getattr(ng.nn.functional, name)(ng.tensor(x), -1, dtype=ng.float32)
    assert typed.dtype == ng.float32


def test_tensor_constructor_with_sizes_makes_a_tensor_of_those_sizes_as_torch():
    # ng.Tensor(40, 1) raised "only Tensors of floating point dtype can require gradients"
    # (its second argument was taken for requires_grad)
    for args in [(40, 1), (5,), (), (2, 3, 4)]:
        t = ng.Tensor(*args)
        assert tuple(t.shape) == tuple(torch.Tensor(*args).shape)
        assert t.dtype == ng.get_default_dtype() and not t.requires_grad
    assert tuple(ng.Tensor(ng.Size([2, 2])).shape) == (2, 2)
    # data: the default dtype, as torch's legacy constructor (integers become floats)
    for data in ([1, 2], [1.5, 2.5], np.array([1, 2]), [[True, False]]):
        t, r = ng.Tensor(data), torch.Tensor(data)
        assert t.dtype == ng.get_default_dtype() and t.tolist() == r.tolist()
    a = np.array([1.0, 2.0], np.float32)
    t = ng.Tensor(a)
    a[0] = 7.0
    assert t.dtype == ng.float32 and t.tolist() == [7.0, 2.0]  # (its memory, as before)
    assert ng.Tensor([1.0], requires_grad=True).requires_grad
    for bad, err, match in [
        ((-1,), RuntimeError, "Trying to create tensor with negative dimension -1: \\[-1\\]"),
        ((2.5,), TypeError, "new\\(\\): data must be a sequence \\(got float\\)"),
        ((True,), TypeError, "new\\(\\): data must be a sequence \\(got bool\\)"),
    ]:
        for lib in (ng, torch):
            with pytest.raises(err, match=match):
                lib.Tensor(*bad)


def test_finfo_and_iinfo_give_torchs_limits():
    for d in ("float16", "float32", "float64"):
        ours, ref = ng.finfo(getattr(ng, d)), torch.finfo(getattr(torch, d))
        for k in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
            assert getattr(ours, k) == getattr(ref, k), (d, k)
        assert ours.dtype == str(ref.dtype).removeprefix("torch.") and repr(ours) == repr(ref)
    assert ng.finfo().dtype == np.dtype(ng.get_default_dtype()).name
    for d in ("uint8", "int8", "int16", "int32", "int64"):
        ours, ref = ng.iinfo(getattr(ng, d)), torch.iinfo(getattr(torch, d))
        assert (ours.bits, ours.max, ours.min) == (ref.bits, ref.max, ref.min)
        assert repr(ours) == repr(ref)
    with pytest.raises(TypeError, match="torch.finfo\\(\\) requires a floating point input type"):
        ng.finfo(ng.int64)
    with pytest.raises(TypeError, match="torch.iinfo\\(\\) requires an integer input type"):
        ng.iinfo(ng.float32)
