def stencil7(xp, inputs, dims):
    out, x = inputs["out"].copy(), inputs["in"]
    inner = (slice(1, -1),) * 3
    neighbours = (
        x[1:-1, 1:-1, :-2]
        + x[1:-1, 1:-1, 2:]
        + x[1:-1, :-2, 1:-1]
        + x[1:-1, 2:, 1:-1]
        + x[:-2, 1:-1, 1:-1]
        + x[2:, 1:-1, 1:-1]
    )
    out[inner] = 0.5 * x[inner] + neighbours / 12.0
    return {"out": out}
