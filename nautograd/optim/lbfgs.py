"""``torch.optim.LBFGS``: limited-memory BFGS with an optional strong-Wolfe line search, the
same iteration and stopping rules as torch's (after minFunc), on flat numpy vectors of the
parameters' dtype."""

import numpy as np

from ..autograd.grad_mode import enable_grad, no_grad
from .optimizer import Optimizer


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1, g1) and (x2, f2, g2), kept in ``bounds``
    (by default the interval between the points); their midpoint if the cubic has none."""
    if bounds is not None:
        lo, hi = bounds
    else:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1**2 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = np.sqrt(d2_square)
    if x1 <= x2:
        at = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        at = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(at, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9, max_ls=25):
    """A step ``t`` along ``d`` satisfying the strong Wolfe conditions: bracket, then zoom
    (More and Thuente's scheme as minFunc's lswolfe). Returns (f, g, t, evaluations)."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = evaluate(t)
    evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    bracket = bracket_f = bracket_g = bracket_gtd = None
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        # extrapolate: a cubic step between 1.01 t and 10 t
        low, high = t + 0.01 * (t - t_prev), t * 10
        previous = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new, bounds=(low, high))
        t_prev, f_prev, g_prev, gtd_prev = previous, f_new, g_new.copy(), gtd_new
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    # zoom: shrink the bracket to a point that satisfies the conditions
    insufficient = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(
            bracket[0], bracket_f[0], bracket_gtd[0], bracket[1], bracket_f[1], bracket_gtd[1]
        )
        # a trial too close to an end of the bracket moves to 0.1 of its length inside
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insufficient or t >= max(bracket) or t <= min(bracket):
                if abs(t - max(bracket)) < abs(t - min(bracket)):
                    t = max(bracket) - eps
                else:
                    t = min(bracket) + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], evals


class LBFGS(Optimizer):
    """L-BFGS (``torch.optim.LBFGS``): ``step(closure)`` runs up to ``max_iter`` iterations,
    each a quasi-Newton direction from the last ``history_size`` steps, moved by ``lr``
    or by a strong-Wolfe line search (``line_search_fn="strong_wolfe"``). One parameter
    group only; the closure re-evaluates the loss and its gradients."""

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):  # fmt: skip
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)  # fmt: skip
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._params = self.param_groups[0]["params"]

    def _flat_grad(self):
        return np.concatenate(
            [
                np.zeros(p._data.size, p._data.dtype) if p.grad is None else p.grad._data.ravel()
                for p in self._params
            ]
        )

    def _add(self, step, direction):
        offset = 0
        for p in self._params:
            a = p._data
            a += (step * direction[offset : offset + a.size]).reshape(a.shape).astype(a.dtype)
            offset += a.size
            p._bump()

    def _values(self):
        return [p._data.copy() for p in self._params]

    def _restore(self, values):
        for p, v in zip(self._params, values, strict=True):
            p._data[...] = v
            p._bump()

    def step(self, closure):
        """Run the iterations; ``closure`` (called under grad mode) returns the loss."""
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        def evaluate():
            with enable_grad():
                return closure()

        with no_grad():
            state = self.state[self._params[0]]  # (torch keeps the global state there too)
            state.setdefault("func_evals", 0)
            state.setdefault("n_iter", 0)
            orig_loss = evaluate()
            loss = float(orig_loss)
            current_evals = 1
            state["func_evals"] += 1
            flat_grad = self._flat_grad()
            if np.abs(flat_grad).max() <= tolerance_grad:
                return orig_loss
            d, t = state.get("d"), state.get("t")
            old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
            h_diag = state.get("H_diag")
            prev_flat_grad, prev_loss = state.get("prev_flat_grad"), state.get("prev_loss")
            dtype = flat_grad.dtype.type
            n_iter = 0
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d = -flat_grad
                    old_dirs, old_stps, ro = [], [], []
                    h_diag = 1
                else:
                    # the memory: y = g - g_prev, s = t d, kept while y's = y.s > 1e-10
                    y = flat_grad - prev_flat_grad
                    s = d * t
                    ys = y.dot(s)
                    if ys > 1e-10:
                        if len(old_dirs) == history_size:
                            old_dirs.pop(0)
                            old_stps.pop(0)
                            ro.pop(0)
                        old_dirs.append(y)
                        old_stps.append(s)
                        ro.append(dtype(1.0) / ys)
                        h_diag = ys / y.dot(y)
                    # the two-loop recursion: d = -H g
                    al = state.setdefault("al", [None] * history_size)
                    q = -flat_grad
                    for i in range(len(old_dirs) - 1, -1, -1):
                        al[i] = old_stps[i].dot(q) * ro[i]
                        q = q - al[i] * old_dirs[i]
                    d = r = q * h_diag
                    for i in range(len(old_dirs)):
                        be_i = old_dirs[i].dot(r) * ro[i]
                        r += (al[i] - be_i) * old_stps[i]
                prev_flat_grad = flat_grad.copy()
                prev_loss = loss
                # the first step is at most 1 / |g|_1 (times lr)
                if state["n_iter"] == 1:
                    t = min(dtype(1.0), dtype(1.0) / np.abs(flat_grad).sum()) * lr
                else:
                    t = lr
                gtd = flat_grad.dot(d)
                if gtd > -tolerance_change:
                    break
                ls_func_evals = 0
                if line_search_fn is not None:
                    if line_search_fn != "strong_wolfe":
                        raise RuntimeError("only 'strong_wolfe' is supported")
                    x_init = self._values()

                    def along(step, x_init=x_init, d=d):
                        self._add(step, d)
                        value = float(evaluate())
                        grad = self._flat_grad()
                        self._restore(x_init)
                        return value, grad

                    loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                        along, t, d, loss, flat_grad, gtd
                    )
                    self._add(t, d)
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                else:
                    self._add(t, d)
                    opt_cond = False
                    if n_iter != max_iter:
                        loss = float(evaluate())
                        flat_grad = self._flat_grad()
                        opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                        ls_func_evals = 1
                current_evals += ls_func_evals
                state["func_evals"] += ls_func_evals
                if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                    break
                if np.abs(d * t).max() <= tolerance_change:
                    break
                if abs(loss - prev_loss) < tolerance_change:
                    break
            state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                         prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)  # fmt: skip
        return orig_loss
