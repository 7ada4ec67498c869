"""The thesis test bed (Chapter 4) shared by both back ends, the Mininet measurement
(exo_figures) and the simulator (exo_sim): its scale and constants (scale, thesis), the loss
rules (loss_rules), the Zipf arithmetic and the ideal (zipf_math, ideal), the recovery criteria
of Figure 4.4 (recovery), and the record every results/fig4_N.json and results/sim/fig4_N.json
carries under `testbed` with one schema (record), which `python -m exo_testbed.compare` plots
on one chart per figure."""
