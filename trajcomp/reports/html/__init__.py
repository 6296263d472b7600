"""The report's HTML page.

- `page.py`: the page of a report, or of two compared.
- `figures.py`: its charts; `svg.py`: the SVG they are drawn in; `markup.py`: the page's HTML and its writing.
"""
