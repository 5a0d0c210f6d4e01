#!/usr/bin/env python3
"""Lockstep: how the polynomial coefficients of backends/transcendental.h
were derived.  Run it (python3 with numpy and mpmath) to print them again.

Method, for every polynomial:
  - the target function is evaluated with mpmath at 50 digits on N
    Chebyshev nodes of the reduced interval;
  - the weight w(x) turns the polynomial's error into the error of the final
    result relative to the function, as the sequence in transcendental.h
    uses the polynomial (e.g. exp uses 1 + r + r^2 q(r), so an error dq in
    q is an error r^2 dq / e^r in e^r);
  - minimax of w * (poly - target) by Lawson's iteratively reweighted least
    squares (200 iterations, numpy lstsq);
  - the coefficients are rounded to f32 one at a time, lowest degree first,
    refitting the remaining ones after each rounding, so later coefficients
    absorb the rounding of earlier ones.
The printed bound is the weighted max error of the rounded polynomial on the
nodes.  The end-to-end errors (every f32 input, every rounding of the
sequence) are measured by tests/exhaustive.c and stated in
docs/numerics.md section 10.
"""
import struct

import mpmath as mp
import numpy as np

mp.mp.dps = 50


def f32(x):
    return struct.unpack('<f', struct.pack('<f', float(x)))[0]


def hexf(x):
    s = float(f32(x)).hex()
    m, e = s.split('p')
    m = m.rstrip('0').rstrip('.')
    return m + 'p' + e + 'f'


def nodes(lo, hi, n):
    return (np.cos(np.pi * (np.arange(n) + 0.5) / n) + 1) / 2 * (hi - lo) + lo


def lawson(a, b, w, iters=200):
    lam = np.ones(len(b)) / len(b)
    best = None
    for _ in range(iters):
        sw = np.sqrt(lam) * w
        c, *_ = np.linalg.lstsq(a * sw[:, None], b * sw, rcond=None)
        err = np.abs(w * (a @ c - b))
        if best is None or err.max() < best[0]:
            best = (err.max(), c)
        lam = lam * err
        if lam.sum() == 0:
            break
        lam /= lam.sum()
    return best[1]


def fit(xs, deg, target, w):
    """f32 coefficients c_0..c_deg of sum c_i x^i, and the weighted error."""
    basis = np.stack([xs ** i for i in range(deg + 1)], axis=1)
    coeffs = []
    for k in range(deg + 1):
        fixed = sum(c * basis[:, i] for i, c in enumerate(coeffs)) if coeffs else 0
        c = lawson(basis[:, k:], target - fixed, w)
        coeffs.append(f32(c[0]))
    err = np.abs(w * (basis @ np.array(coeffs) - target)).max()
    return coeffs, err


def show(name, prefix, coeffs, err):
    print('/* %s: weighted error 2^%.1f */' % (name, np.log2(err)))
    for i, c in enumerate(coeffs):
        v = hexf(c)
        print('#define %s%d %s' % (prefix, i, '(' + v + ')' if v.startswith('-') else v))


def mpf_array(fn, xs):
    return np.array([float(fn(mp.mpf(float(x)))) for x in xs])


def exp_q():
    # e^r = 1 + r + r^2 q(r), |r| <= ln2/2 (+0.05% for the rounding of k)
    a = 0.34658 * 1.0005
    xs = nodes(-a, a, 3000)
    xs = xs[np.abs(xs) > 1e-6]
    tq = mpf_array(lambda r: (mp.exp(r) - 1 - r) / r ** 2, xs)
    return fit(xs, 4, tq, xs ** 2 / np.exp(xs))


def log_q():
    # log1p(f) = f + f^2 q(f), f = m - 1, m in [f32(sqrt(1/2)), 2 f32(sqrt(1/2)))
    s = f32(0.70710677)
    xs = nodes(s - 1, 2 * s - 1, 3000)
    xs = xs[np.abs(xs) > 1e-6]
    tq = mpf_array(lambda f: (mp.log1p(f) - f) / f ** 2, xs)
    return fit(xs, 8, tq, xs ** 2 / np.abs(np.log1p(xs)))


def tanh_p():
    # tanh(x) = x + x z p(z), z = x^2 in [0, 1]
    zs = nodes(0, 1.0, 2000)
    zs = zs[zs > 1e-8]
    x = np.sqrt(zs)
    tq = mpf_array(lambda z: (mp.tanh(mp.sqrt(z)) / mp.sqrt(z) - 1) / z, zs)
    return fit(zs, 7, tq, x * zs / np.tanh(x))


def erf_p():
    # erf(x) = x + x p(z), z = x^2 in [0, 0.875^2]
    zs = nodes(0, 0.875 ** 2, 2000)
    zs = zs[zs > 1e-10]
    x = np.sqrt(zs)
    tq = mpf_array(lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z) - 1, zs)
    return fit(zs, 6, tq, x / mpf_array(mp.erf, x))


def erf_g():
    # erfc(t) = e^(t (P(t) - 1)), t in [0.875, 4]; an error dP is an error
    # t erfc(t) dP in erf
    ts = nodes(0.875, 4.0, 2000)
    g = mpf_array(lambda t: mp.log(mp.erfc(t)) / t + 1, ts)
    w = ts * mpf_array(lambda t: mp.erfc(t) / mp.erf(t), ts)
    return fit(ts, 6, g, w)


def gelu_w():
    # t Phi(-t) e^(t^2/2) = W(s) s, s = t / (t + 3) in [0, 16/19),
    # W a polynomial in s - 0.421875
    c, s0 = 3.0, 0.421875
    ss = nodes(0, 16 / (16 + c), 3000)
    ts = c * ss / (1 - ss)
    w = mpf_array(lambda t: mp.erfc(t / mp.sqrt(2)) / 2 * mp.exp(t * t / 2) * (t + c), ts)
    return fit(ss - s0, 10, w, 1 / w)


def sin_s():
    # sin(r) = r + r z S(z), z = r^2, |r| <= 0.93 (pi/4 plus the quadrant
    # error of k = rne(x * f32(2/pi)) for |x| up to 2^22)
    zs = nodes(0, 0.93 ** 2, 2000)
    zs = zs[zs > 1e-10]
    x = np.sqrt(zs)
    t = mpf_array(lambda z: (mp.sin(mp.sqrt(z)) / mp.sqrt(z) - 1) / z, zs)
    return fit(zs, 3, t, x * zs / np.sin(x))


def cos_c():
    # cos(r) = 1 - z/2 + z^2 C(z), z = r^2, |r| <= 0.93
    zs = nodes(0, 0.93 ** 2, 2000)
    zs = zs[zs > 1e-10]
    t = mpf_array(lambda z: (mp.cos(mp.sqrt(z)) - 1 + z / 2) / z ** 2, zs)
    return fit(zs, 3, t, zs * zs / np.cos(np.sqrt(zs)))


if __name__ == '__main__':
    show('exp: q(r)', 'LK_EXP_Q', *exp_q())
    show('log: q(f)', 'LK_LOG_Q', *log_q())
    show('tanh: p(z)', 'LK_TANH_P', *tanh_p())
    show('erf, |x| < 0.875: p(z)', 'LK_ERF_P', *erf_p())
    show('erf, |x| >= 0.875: P(t)', 'LK_ERF_G', *erf_g())
    show('erf-GELU: W(s - S0)', 'LK_GELU_W', *gelu_w())
    show('sin: S(z)', 'LK_SIN_S', *sin_s())
    show('cos: C(z)', 'LK_COS_C', *cos_c())
