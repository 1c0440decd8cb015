"""One module per page: each lays out its widgets and figures, and declares its URL parameters (PARAMS).

The Softmax + top-k page and the Timing page's body live in ui/topk.py (its timing: ui/topk_timing.py) and
ui/timing.py; the results files both load, in ui/results.py.
"""
