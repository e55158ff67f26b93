"""ITERATION explicit steps of the hotspot stencil with the spec's constants (Cap, Rx, Ry,
Rz and step all 1.0); a neighbour outside the chip is the cell itself (the kernel clamps
N/S/E/W to the valid range)."""

AMB_TEMP = 80.0
STEP_DIV_CAP = RX_1 = RY_1 = RZ_1 = 1.0


def calculate_temp(xp, inputs, dims):
    temp = inputs["temp_src"].astype(xp.float64)
    power = inputs["power"].astype(xp.float64)
    for _ in range(dims["ITERATION"]):
        padded = xp.pad(temp, 1, mode="edge")
        north, south = padded[:-2, 1:-1], padded[2:, 1:-1]
        west, east = padded[1:-1, :-2], padded[1:-1, 2:]
        temp = temp + STEP_DIV_CAP * (
            power
            + (south + north - 2.0 * temp) * RY_1
            + (east + west - 2.0 * temp) * RX_1
            + (AMB_TEMP - temp) * RZ_1
        )
    return {"temp_dst": temp}
