"""Client ID Metadata Documents: DOT fetches them (https only, public addresses only, no redirects,
size cap, timeout, client_id must equal the URL); Charming adds its redirect-URI policy on top."""

from __future__ import annotations

from typing import Any

from oauth2_provider import cimd

from apps_registry.oauth.policy import redirect_uris_problem


def metadata_document_check(metadata: dict[str, Any]) -> None:
    """Refuse a document that names a redirect URI Charming would refuse at registration."""
    problem = redirect_uris_problem(metadata.get("redirect_uris"))
    if problem:
        raise cimd.CIMDError(f"invalid_redirect_uri: {problem}")


class PolicyMetadataFetcher(cimd.SafeMetadataFetcher):
    """DOT's SSRF-hardened fetcher, then the redirect-URI policy."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        metadata, max_age = self.document_fetch(client_id)
        metadata_document_check(metadata)
        return metadata, max_age

    def document_fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        return super().fetch(client_id)
