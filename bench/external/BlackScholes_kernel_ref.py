"""Black-Scholes call and put prices with the sample's polynomial approximation of the
normal CDF (float2 buffers arrive as (N, 2) arrays)."""

A = (0.31938153, -0.356563782, 1.781477937, -1.821255978, 1.330274429)
RSQRT2PI = 0.39894228040143267793994605993438


def _cnd(xp, d):
    k = 1.0 / (1.0 + 0.2316419 * xp.abs(d))
    poly = k * (A[0] + k * (A[1] + k * (A[2] + k * (A[3] + k * A[4]))))
    cnd = RSQRT2PI * xp.exp(-0.5 * d * d) * poly
    return xp.where(d > 0, 1.0 - cnd, cnd)


def BlackScholesGPU(xp, inputs, dims):
    s = inputs["d_StockPrice"].astype(xp.float64)
    x = inputs["d_OptionStrike"].astype(xp.float64)
    t = inputs["d_OptionYears"].astype(xp.float64)
    r, v = 0.02, 0.30
    sqrt_t = xp.sqrt(t)
    d1 = (xp.log(s / x) + (r + 0.5 * v * v) * t) / (v * sqrt_t)
    d2 = d1 - v * sqrt_t
    cnd1, cnd2 = _cnd(xp, d1), _cnd(xp, d2)
    exp_rt = xp.exp(-r * t)
    call = s * cnd1 - x * exp_rt * cnd2
    put = x * exp_rt * (1.0 - cnd2) - s * (1.0 - cnd1)
    return {"d_CallResult": call, "d_PutResult": put}
