"""The Streamlit UI of the softmax explorer: the sidebar, one module per page (ui/pages/), the URL
parameter table, cached computations, and pure plotly figure builders (ui/figures/, no Streamlit).

Nothing here imports cupy: everything goes through the `explorer` package.
"""
