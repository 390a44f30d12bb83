"""CSRL (Sabanayagam et al. 2024, "Cluster Specific Representation Learning"): Figures 2-5 and 7-13 from run
directories, with the paper's claims checked on our numbers.

The paper has no tables: its quantitative figures (2, 7, 8) are bar charts whose values are not published, so
the "paper" columns read n/a except the exact parameter counts (``published/csrl.yaml``). Every figure function
takes the runs of one experiment and an output folder and returns a ``Table`` whose ``figures`` are the PNGs it
drew; scripts/make_tables.py picks the function by the figure's name (``csrl/fig2`` -> ``fig2``) and the runs by
``SOURCES``. One module per model family:

- ``autoencoders``: Figs. 2, 7, 8 (AE1-3, TAE1-2, PTAE; one pool of runs, ``name: csrl/autoencoders``);
- ``tvae``: Figs. 3, 9, 10, 11 (tensorized VAE);
- ``tcl``: Figs. 4, 12 (standard and tensorized contrastive learning);
- ``trbm``: Figs. 5, 13 (tensorized and standard RBM).
"""

from __future__ import annotations

from clusterable.tables.csrl.autoencoders import ae_results, fig2, fig7, fig8, kmeans_raw, select_lr
from clusterable.tables.csrl.tcl import fig4, fig12
from clusterable.tables.csrl.trbm import fig5, fig13
from clusterable.tables.csrl.tvae import fig3, fig9, fig10, fig11

AE_POOL = "csrl/autoencoders"
# Fig. 12 is drawn from the Fig. 4 runs, Fig. 13 (the standard RBM) from the Fig. 5 runs.
SOURCES = {
    "fig2": AE_POOL,
    "fig7": AE_POOL,
    "fig8": AE_POOL,
    "fig3": "csrl/fig3",
    "fig9": "csrl/fig9",
    "fig10": "csrl/fig10",
    "fig11": "csrl/fig11",
    "fig4": "csrl/fig4",
    "fig12": "csrl/fig4",
    "fig5": "csrl/fig5",
    "fig13": "csrl/fig5",
}

__all__ = [
    "SOURCES",
    "ae_results",
    "kmeans_raw",
    "select_lr",
    "fig2",
    "fig3",
    "fig4",
    "fig5",
    "fig7",
    "fig8",
    "fig9",
    "fig10",
    "fig11",
    "fig12",
    "fig13",
]
