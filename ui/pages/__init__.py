"""One module per page: each lays out its widgets and figures, and declares its URL parameters (PARAMS).

The Softmax + top-k page and the Timing page's body live in ui/topk.py and ui/timing.py.
"""
