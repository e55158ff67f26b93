def block_sum(xp, inputs, dims):
    total = inputs["in"].astype("float64").sum(keepdims=True)
    return {"out": inputs["out"].astype("float64") + total}
