"""PolyBench's 3 x 3 convolution: weights c[row offset][column offset] as the kernel's
literals (float constants), the border of B left as it was."""

import numpy as np

# rows: the offset of the row read (c11 c21 c31, c12 c22 c32, c13 c23 c33)
WEIGHTS = np.array([[0.2, 0.5, -0.8], [-0.3, 0.6, -0.9], [0.4, 0.7, 0.10]], dtype=np.float32)


def convolution2D_kernel(xp, inputs, dims):
    a = inputs["A"].astype(xp.float64)
    out = inputs["B"].astype(xp.float64)
    ni, nj = a.shape
    acc = xp.zeros((ni - 2, nj - 2), dtype=xp.float64)
    for di in (-1, 0, 1):
        for dj in (-1, 0, 1):
            weight = float(WEIGHTS[di + 1][dj + 1])
            acc += weight * a[1 + di : ni - 1 + di, 1 + dj : nj - 1 + dj]
    out[1:-1, 1:-1] = acc
    return {"B": out}
