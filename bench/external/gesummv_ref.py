def gesummv_kernel(xp, inputs, dims):
    x = inputs["x"].astype(xp.float64)
    tmp = inputs["tmp"] + inputs["A"].astype(xp.float64) @ x
    y = inputs["y"] + inputs["B"].astype(xp.float64) @ x
    return {"tmp": tmp, "y": 1.5 * tmp + 1.2 * y}
