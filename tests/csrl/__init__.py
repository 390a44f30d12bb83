"""Tests of the Cluster-Specific Representation Learning pieces (Sabanayagam et al. 2024)."""
