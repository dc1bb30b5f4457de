"""Use cases that orchestrate the domain and the ports: place, move, claims, node sync, check,
simulate."""
