"""The data-quality report: the history shaped (``data``), charts (``charts``), and the
static site from Jinja templates (``site``)."""
