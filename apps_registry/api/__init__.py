"""The token-authenticated REST API (DRF): one module per area, routes in urls.py."""
