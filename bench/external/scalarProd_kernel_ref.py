def scalarProdGPU(xp, inputs, dims):
    a = inputs["d_A"].astype(xp.float64)
    return {"d_C": (a * inputs["d_B"]).sum(axis=1)}
