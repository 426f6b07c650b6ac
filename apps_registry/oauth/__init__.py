"""Charming as its own OAuth 2.1 authorization server, built on django-oauth-toolkit (DOT).

DOT does the protocol (authorization code + PKCE, rotated refresh tokens, RFC 8707 resources, RFC 9207
`iss`, RFC 7591 registration, Client ID Metadata Documents); this package holds Charming's policy on top:
the scopes, which redirect URIs a client may register, how often an address may register, and the pages.
"""
