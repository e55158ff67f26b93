"""ITERATION rows of pathfinder's dynamic programme: each cell takes the cheapest of its three
upper neighbours (clamped at the edges) plus its wall cost."""


def dynproc_kernel(xp, inputs, dims):
    prev = inputs["gpuSrc"].astype(xp.int64)
    wall = inputs["gpuWall"].astype(xp.int64)
    for i in range(dims["ITERATION"]):
        padded = xp.pad(prev, 1, mode="edge")
        prev = xp.minimum(xp.minimum(padded[:-2], padded[1:-1]), padded[2:]) + wall[i]
    return {"gpuResults": prev}
