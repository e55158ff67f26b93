def atax_kernel1(xp, inputs, dims):
    return {"tmp": inputs["A"].astype(xp.float64) @ inputs["x"]}
