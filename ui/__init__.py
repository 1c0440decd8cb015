"""The Streamlit UI of the softmax explorer: pages, sidebar widgets, and pure plotly figure builders.

Nothing here imports cupy: everything goes through the `explorer` package.
"""
