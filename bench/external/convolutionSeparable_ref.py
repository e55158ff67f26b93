"""The separable convolution's passes: 17 taps, zero outside the image (as the samples'
halo loads do); ``c_Kernel[KERNEL_RADIUS - j]`` weighs the pixel at offset ``j``."""

RADIUS = 8


def _convolve(xp, src, taps, axis):
    out = xp.zeros(src.shape, dtype=xp.float64)
    size = src.shape[axis]
    for j in range(-RADIUS, RADIUS + 1):
        weight = float(taps[RADIUS - j])
        shifted = xp.zeros(src.shape, dtype=xp.float64)
        lo, hi = max(0, -j), min(size, size - j)
        if axis == 1:
            shifted[:, lo:hi] = src[:, lo + j : hi + j]
        else:
            shifted[lo:hi, :] = src[lo + j : hi + j, :]
        out += weight * shifted
    return out


def convolutionRowsKernel(xp, inputs, dims):
    return {"d_Dst": _convolve(xp, inputs["d_Src"], inputs["c_Kernel"], axis=1)}


def convolutionColumnsKernel(xp, inputs, dims):
    return {"d_Dst": _convolve(xp, inputs["d_Src"], inputs["c_Kernel"], axis=0)}
