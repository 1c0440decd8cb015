"""One module per page: each lays out its widgets and figures, and declares its URL parameters (PARAMS).

The Softmax + top-k page's timing section is ui/topk_timing.py; the results files the Timing and top-k pages
load, in ui/results.py.
"""
