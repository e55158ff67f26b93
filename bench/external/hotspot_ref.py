"""ITER explicit steps of the hotspot stencil; a neighbour outside the chip is the cell
itself (the kernel clamps N/S/E/W to the valid range)."""

AMB_TEMP = 80.0


def calculate_temp(xp, inputs, dims):
    temp = inputs["temp_src"].astype(xp.float64)
    power = inputs["power"].astype(xp.float64)
    step_div_cap = float(xp.float32(0.05) / xp.float32(0.5))
    rx_1, ry_1, rz_1 = 1.0, 1.0, float(xp.float32(1) / xp.float32(4.0))
    for _ in range(dims["ITER"]):
        padded = xp.pad(temp, 1, mode="edge")
        north, south = padded[:-2, 1:-1], padded[2:, 1:-1]
        west, east = padded[1:-1, :-2], padded[1:-1, 2:]
        temp = temp + step_div_cap * (
            power
            + (south + north - 2.0 * temp) * ry_1
            + (east + west - 2.0 * temp) * rx_1
            + (AMB_TEMP - temp) * rz_1
        )
    return {"temp_dst": temp}
