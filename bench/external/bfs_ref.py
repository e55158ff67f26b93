"""One level of Rodinia's BFS: each frontier node leaves the frontier and marks its
unvisited neighbours (cost + 1, updating mask set)."""


def Kernel(xp, inputs, dims):
    nodes = inputs["g_graph_nodes"]
    mask = inputs["g_graph_mask"] != 0
    visited = inputs["g_graph_visited"] != 0
    cost = inputs["g_cost"].astype(xp.int64)
    updating = inputs["g_updating_graph_mask"].astype(xp.int64)
    edges = inputs["g_graph_edges"].astype(xp.int64)
    start = nodes["starting"].astype(xp.int64)
    degree = nodes["no_of_edges"].astype(xp.int64)
    frontier = xp.nonzero(mask)[0]
    counts = degree[frontier]
    owner = xp.repeat(frontier, counts)
    offsets = xp.arange(int(counts.sum())) - xp.repeat(xp.cumsum(counts) - counts, counts)
    targets = edges[start[owner] + offsets]
    fresh = ~visited[targets]
    new_cost = cost.copy()
    new_cost[targets[fresh]] = cost[owner[fresh]] + 1
    updating[targets[fresh]] = 1
    return {
        "g_graph_mask": xp.zeros_like(updating),
        "g_updating_graph_mask": updating,
        "g_cost": new_cost,
    }
