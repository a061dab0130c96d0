"""archscout layer 1: feasibility of a candidate as violation floats (<= 0 feasible) with messages."""
