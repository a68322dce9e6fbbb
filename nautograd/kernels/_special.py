"""Special functions for compiled code: digamma, the Hurwitz zeta function and polygamma.

Numba compiles Python's ``math`` (``lgamma``, ``erf``) but has no digamma or polygamma, which
the derivatives of ``lgamma`` and ``digamma`` need. These are the algorithms torch computes
them with: Cephes' (psi.c, zeta.c) for digamma and polygamma(n >= 2), and torch's own series
for trigamma, so that values and gradients agree with torch's to the last bit or two. The
modified Bessel functions I_0 and I_1 are power series below |x| = 20 and the asymptotic
series above (within 2e-15 of torch's relative).
"""

import math

import numba
import numpy as np

_PSI_10 = 2.25175258906672110764  # digamma(10)
_MACHEP = 1.11022302462515654042e-16
# the asymptotic series of digamma: B_2k / (2k), highest power first (Cephes psi.c's A)
_PSI_A = np.array([
    8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
    -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
    8.33333333333333333333e-2,
])  # fmt: skip
# Euler-Maclaurin's coefficients (2k)! / B_2k of the Hurwitz zeta function (Cephes zeta.c)
_ZETA_A = np.array([
    12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
    -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
    1.8152105401943546773e17, -7.1661652561756670113e18,
])  # fmt: skip


@numba.njit(inline="always", error_model="numpy")
def digamma(x):
    """d/dx log Gamma(x); -inf at 0 (+0; +inf at -0), NaN at the negative integers (torch)."""
    if x == 0.0:
        return -math.copysign(math.inf, x)
    if math.isnan(x) or x == -math.inf:
        return math.nan
    result = 0.0
    if x < 0.0:
        if x == math.floor(x):
            return math.nan
        # reflection: psi(1 - x) - psi(x) = pi cot(pi x)
        r = x - math.trunc(x)  # (x mod 1 with the sign of x: tan has period pi)
        result = -math.pi / math.tan(math.pi * r)
        x = 1.0 - x
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    if x == 10.0:
        return result + _PSI_10
    y = 0.0
    if x < 1.0e17:
        z = 1.0 / (x * x)
        p = 0.0
        for c in _PSI_A:
            p = p * z + c
        y = z * p
    return result + math.log(x) - 0.5 / x - y


@numba.njit(inline="always", error_model="numpy")
def zeta(s, q):
    """The Hurwitz zeta function sum_k (k + q)^-s, s > 1."""
    if s == 1.0:
        return math.inf
    if s < 1.0 or math.isnan(s) or math.isnan(q):
        return math.nan
    if q <= 0.0:
        if q == math.floor(q):
            return math.inf
        if s != math.floor(s):
            return math.nan  # (q^-s is not real)
    total = q**-s
    a = q
    b = 0.0
    i = 0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a**-s
        total += b
        if abs(b / total) < _MACHEP:
            return total
    w = a
    total += b * w / (s - 1.0)
    total -= 0.5 * b
    f = 1.0
    k = 0.0
    for j in range(12):
        f *= s + k
        b /= w
        t = f * b / _ZETA_A[j]
        total += t
        if abs(t / total) < _MACHEP:
            return total
        k += 1.0
        f *= s + k
        b /= w
        k += 1.0
    return total


@numba.njit(inline="always", error_model="numpy")
def trigamma(x):
    """polygamma(1, x), as torch computes it: the reflection pi^2 / sin^2(pi x) below 1/2,
    six steps of the recurrence, then the asymptotic series (relative error ~1e-9)."""
    sign = 1.0
    result = 0.0
    if x < 0.5:
        sign = -1.0
        s = math.sin(math.pi * x)
        result -= math.pi * math.pi / (s * s)
        x = 1.0 - x
    for _ in range(6):
        result += 1.0 / (x * x)
        x += 1.0
    ixx = 1.0 / (x * x)
    result += (
        1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))
    ) / x
    return sign * result


@numba.njit(inline="always", error_model="numpy")
def polygamma(n, x):
    """The n-th derivative of digamma: (-1)^(n + 1) n! zeta(n + 1, x), n >= 1 (n = 0:
    digamma)."""
    if n == 0.0:
        return digamma(x)
    if n == 1.0:
        return trigamma(x)
    sign = 1.0 if int(n) % 2 == 1 else -1.0
    return sign * math.exp(math.lgamma(n + 1.0)) * zeta(n + 1.0, x)


_BESSEL_SWITCH = 20.0  # |x| below: the power series; above: the asymptotic series


@numba.njit(inline="always", error_model="numpy")
def _bessel_series(nu, a):
    # I_nu(a) e^-a, nu = 0 or 1, a >= 0: (a/2)^nu sum_k (a^2/4)^k / (k! (k + nu)!), every term
    # positive (no cancellation: the relative error stays at a few ulps)
    q = 0.25 * a * a
    term = 1.0 if nu == 0 else 0.5 * a
    total = term
    k = 1.0
    while term > 1e-17 * total:
        term *= q / (k * (k + nu))
        total += term
        k += 1.0
    return total * math.exp(-a)


@numba.njit(inline="always", error_model="numpy")
def _bessel_asymptotic(nu, a):
    # I_nu(a) e^-a for a >= 20: 1 / sqrt(2 pi a) sum_k (-1)^k prod_j<=k (4 nu^2 - (2j - 1)^2)
    # / (k! (8a)^k), summed while the terms fall (the smallest is ~e^(-2a) of the sum)
    mu = 4.0 * nu * nu
    term = 1.0
    total = 1.0
    k = 1.0
    while k < 60.0:
        nxt = -term * (mu - (2.0 * k - 1.0) ** 2) / (k * 8.0 * a)
        if abs(nxt) >= abs(term) or abs(nxt) < 1e-17 * abs(total):
            break
        total += nxt
        term = nxt
        k += 1.0
    return total / math.sqrt(2.0 * math.pi * a)


@numba.njit(inline="always", error_model="numpy")
def bessel_ie(nu, x):
    """The exponentially scaled modified Bessel function I_nu(x) e^-|x|, nu = 0 or 1 (I_1 is
    odd, I_0 even)."""
    if math.isnan(x):
        return x
    a = abs(x)
    if a == math.inf:
        return 0.0
    v = _bessel_series(nu, a) if a < _BESSEL_SWITCH else _bessel_asymptotic(nu, a)
    return -v if nu == 1 and x < 0.0 else v


@numba.njit(inline="always", error_model="numpy")
def bessel_i(nu, x):
    """The modified Bessel function I_nu(x) of the first kind, nu = 0 or 1."""
    # (inf above |x| ~ 709.8 and NaN at +-inf, as torch computes it)
    return bessel_ie(nu, x) * math.exp(abs(x))
