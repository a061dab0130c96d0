"""archscout layer 1: scalar scores of a candidate, each with a direction and a unit."""
