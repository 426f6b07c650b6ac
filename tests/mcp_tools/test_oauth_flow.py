"""End to end, as Claude or ChatGPT connect: the official SDK client's OAuthClientProvider starts from the
bare /mcp URL of a live server, discovers the metadata from the 401, registers itself (DCR), and runs
authorization code + PKCE while Debian's Chromium logs the person in on the site's log-in page and approves
the consent page (the CIMD test starts from a session cookie instead).
Then it calls tools in both protocol versions, refreshes, and is refused once the user disconnects it.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx2
import mcp_types as types
import pytest
from django.test import Client as DjangoClient
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from oauth2_provider.models import AccessToken, Application, RefreshToken

from apps_registry.models import App
from mcp_tools.registry import TOOLS
from tests.browser.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.factories import UserFactory, make_app
from tests.mcp_tools.conftest import LEGACY, MODERN, MODES, LiveServer

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing: apt-get install -y chromium"),
]

CALLBACK = "http://127.0.0.1:33418/callback"
PASSWORD = "a-long-passphrase-for-alice-1"


class MemoryStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client_info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client_info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client_info = client_info


class SignedInBrowser:
    """Chromium acting for the person: opens the authorization URL, logs in on the site's log-in page when sent
    there (or already holds a session cookie), approves the consent page and catches the loopback redirect."""

    def __init__(self, base_url: str, session_cookie: str | None = None, login: tuple[str, str] | None = None) -> None:
        self.base_url = base_url
        self.session_cookie = session_cookie
        self.login = login
        self.login_pages = 0
        self.consent_pages: list[str] = []
        self.callback: asyncio.Future[str] | None = None

    async def __aenter__(self) -> SignedInBrowser:
        from playwright.async_api import async_playwright

        self._playwright = await async_playwright().start()
        self._browser = await self._playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        self.context = await self._browser.new_context()
        self.context.set_default_timeout(15_000)
        if self.session_cookie:
            cookie = {"name": "sessionid", "value": self.session_cookie, "url": self.base_url}
            await self.context.add_cookies([cookie])
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._browser.close()
        await self._playwright.stop()

    async def redirect_handler(self, authorization_url: str) -> None:
        self.callback = asyncio.get_running_loop().create_future()
        page = await self.context.new_page()

        async def catch_callback(route: Any) -> None:
            assert self.callback is not None
            if not self.callback.done():
                self.callback.set_result(route.request.url)
            await route.fulfill(status=200, content_type="text/plain", body="You may close this window.")

        await page.route(f"{CALLBACK}*", catch_callback)
        await page.goto(authorization_url)
        if "/accounts/login/" in page.url:
            assert self.login is not None, "sent to log in without credentials"
            self.login_pages += 1
            await page.fill("#id_username", self.login[0])
            await page.fill("#id_password", self.login[1])
            async with page.expect_navigation():
                await page.click("button:has-text('Log in')")
        self.consent_pages.append(await page.content())
        await page.click("#approve")
        await asyncio.wait_for(asyncio.shield(self.callback), timeout=15)
        await page.close()

    async def callback_handler(self) -> AuthorizationCodeResult:
        assert self.callback is not None
        query = parse_qs(urlsplit(await self.callback).query)
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=query.get("iss", [None])[0])

    async def disconnect_all(self) -> None:
        page = await self.context.new_page()
        await page.goto(f"{self.base_url}/oauth/connected/")
        async with page.expect_navigation():
            await page.click("button:has-text('Disconnect Test host')")
        await page.wait_for_selector("#no-clients")
        await page.close()


@pytest.fixture
def public_url(live: LiveServer, settings) -> LiveServer:
    """The server names itself by the live URL, as CHARMING_PUBLIC_URL does in a deployment."""
    settings.CHARMING_PUBLIC_URL = live.base_url
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "OIDC_ISS_ENDPOINT": live.base_url}
    return live


async def _list_apps(server: LiveServer, auth: OAuthClientProvider, mode: str) -> list[str]:
    http = httpx2.AsyncClient(auth=auth, timeout=30)
    async with http, Client(streamable_http_client(server.mcp_url, http_client=http), mode=mode) as client:
        result = await client.call_tool("list_apps", {})
    assert result.is_error is not True, result
    return [app["name"] for app in result.structured_content["value"]]


def test_the_sdk_client_connects_from_nothing_through_oauth_and_loses_access_when_disconnected(public_url):
    """The person is not signed in: the authorization URL sends them to the log-in page, then to consent."""
    server = public_url
    user = UserFactory(username="alice")
    user.set_password(PASSWORD)
    user.save()
    make_app(owner=user, name="Alice's budget")
    make_app(owner=UserFactory(username="bob"), name="Bob's budget")
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name="Test host",
        redirect_uris=[CALLBACK],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope="apps:read apps:write",
    )

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with SignedInBrowser(server.base_url, login=("alice", PASSWORD)) as browser:
            auth = OAuthClientProvider(
                server.mcp_url,
                metadata,
                storage,
                redirect_handler=browser.redirect_handler,
                callback_handler=browser.callback_handler,
            )
            seen["legacy"] = await _list_apps(server, auth, LEGACY)
            seen["modern"] = await _list_apps(server, auth, MODERN)
            seen["consent_pages"] = list(browser.consent_pages)
            seen["login_pages"] = browser.login_pages
            first_tokens = storage.tokens
            # The access token has expired as far as the client knows: it refreshes before the next call.
            auth.context.token_expiry_time = time.time() - 1
            seen["after_refresh"] = await _list_apps(server, auth, MODERN)
            seen["rotated"] = (first_tokens, storage.tokens)
            await browser.disconnect_all()
            async with httpx2.AsyncClient(timeout=10) as http:
                assert storage.tokens is not None and storage.client_info is not None
                seen["mcp_after_disconnect"] = await http.post(
                    server.mcp_url,
                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                    headers={
                        "Authorization": f"Bearer {storage.tokens.access_token}",
                        "Accept": "application/json, text/event-stream",
                    },
                )
                seen["refresh_after_disconnect"] = await http.post(
                    f"{server.base_url}/oauth/token/",
                    data={
                        "grant_type": "refresh_token",
                        "refresh_token": storage.tokens.refresh_token,
                        "client_id": storage.client_info.client_id,
                    },
                )
        return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), timeout=120))

    assert seen["legacy"] == ["Alice's budget"]
    assert seen["modern"] == ["Alice's budget"]
    assert seen["login_pages"] == 1  # the person logged in on the site's own page, once
    assert len(seen["consent_pages"]) == 1  # one approval served both protocol versions
    assert "Test host" in seen["consent_pages"][0]
    assert "See your apps and read the data stored in them" in seen["consent_pages"][0]
    application = Application.objects.get(name="Test host")
    assert application.registration_source == "dcr"
    assert application.client_type == "public"
    first, refreshed = seen["rotated"]
    assert seen["after_refresh"] == ["Alice's budget"]
    assert refreshed.access_token != first.access_token
    assert refreshed.refresh_token != first.refresh_token
    assert seen["mcp_after_disconnect"].status_code == 401
    assert "Unknown token" in seen["mcp_after_disconnect"].json()["error_description"]
    assert seen["refresh_after_disconnect"].status_code == 400
    assert seen["refresh_after_disconnect"].json()["error"] == "invalid_grant"
    assert not AccessToken.objects.filter(user=user).exists()


def test_the_sdk_client_connects_with_a_client_id_metadata_document_instead_of_registering(public_url, settings):
    from django.core.cache import cache

    from tests.apps_registry.test_oauth_registration import StubFetcher

    server = public_url
    client_id = "https://host.example/oauth/client.json"
    cache.clear()
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "CIMD_METADATA_FETCHER": "tests.apps_registry.test_oauth_registration.StubFetcher",
    }
    StubFetcher.document = {
        "client_id": client_id,
        "client_name": "Hosted agent",
        "redirect_uris": [CALLBACK],
        "grant_types": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_method": "none",
    }
    user = UserFactory(username="alice")
    make_app(owner=user, name="Alice's budget")
    session = DjangoClient()
    session.force_login(user)
    metadata = OAuthClientMetadata(
        client_name="Hosted agent",
        redirect_uris=[CALLBACK],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )

    async def scenario() -> tuple[list[str], list[str]]:
        async with SignedInBrowser(server.base_url, session.cookies["sessionid"].value) as browser:
            auth = OAuthClientProvider(
                server.mcp_url,
                metadata,
                MemoryStorage(),
                redirect_handler=browser.redirect_handler,
                callback_handler=browser.callback_handler,
                client_metadata_url=client_id,
            )
            return await _list_apps(server, auth, MODERN), browser.consent_pages

    apps, consent_pages = asyncio.run(asyncio.wait_for(scenario(), timeout=120))

    assert apps == ["Alice's budget"]
    assert "Hosted agent" in consent_pages[0]
    assert client_id in consent_pages[0]
    assert Application.objects.get(client_id=client_id).registration_source == "cimd"
    assert not Application.objects.filter(registration_source="dcr").exists()
    cache.clear()


@pytest.mark.parametrize("method", ["none", "client_secret_basic", "client_secret_post"])
def test_a_client_registering_with_each_advertised_auth_method_connects_end_to_end(public_url, method):
    """The Done-when of issue 24 item 2: the SDK client registers (DCR) with the method, a person approves in
    Chromium, the client exchanges its code (and later refreshes) authenticating as registered, and calls /mcp."""
    server = public_url
    advertised = DjangoClient().get("/.well-known/oauth-authorization-server").json()
    assert method in advertised["token_endpoint_auth_methods_supported"]
    user = UserFactory(username="alice")
    session = DjangoClient()
    session.force_login(user)
    make_app(owner=user, name="Alice's budget")
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name="Test host",
        redirect_uris=[CALLBACK],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method=method,
    )

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        async with SignedInBrowser(server.base_url, session.cookies["sessionid"].value) as browser:
            auth = OAuthClientProvider(
                server.mcp_url,
                metadata,
                storage,
                redirect_handler=browser.redirect_handler,
                callback_handler=browser.callback_handler,
            )
            first = await _list_apps(server, auth, MODERN)
            assert storage.tokens is not None
            access_tokens = [storage.tokens.access_token]
            auth.context.token_expiry_time = time.time() - 1  # the refresh authenticates the client too
            after_refresh = await _list_apps(server, auth, LEGACY)
            access_tokens.append(storage.tokens.access_token)
            return first, after_refresh, access_tokens

    first, after_refresh, access_tokens = asyncio.run(asyncio.wait_for(scenario(), timeout=120))

    assert first == after_refresh == ["Alice's budget"]
    assert access_tokens[0] != access_tokens[1]
    assert storage.client_info is not None and storage.client_info.token_endpoint_auth_method == method
    assert (storage.client_info.client_secret is None) == (method == "none")
    application = Application.objects.get(client_id=storage.client_info.client_id)
    assert application.client_type == ("public" if method == "none" else "confidential")
    assert RefreshToken.objects.filter(application=application, revoked__isnull=False).count() == 1  # rotated once


class NarrowingBrowser(SignedInBrowser):
    """The person approves, but the first authorization asks only for `first_scope` (a host connecting read-only);
    later ones (step-ups) go as the client sent them. Records the scope each authorization URL asked for."""

    def __init__(self, *args: Any, first_scope: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.first_scope: str | None = first_scope
        self.asked: list[str] = []

    async def redirect_handler(self, authorization_url: str) -> None:
        parts = urlsplit(authorization_url)
        query = parse_qs(parts.query)
        if self.first_scope is not None:
            query["scope"] = [self.first_scope]
            self.first_scope = None
        self.asked.append(query["scope"][0])
        await super().redirect_handler(parts._replace(query=urlencode(query, doseq=True)).geturl())


def test_a_read_only_grant_lists_every_tool_is_refused_a_write_with_403_and_steps_up(public_url):
    """The Done-when of issue 9 with a read-only grant (which, being OAuth, lists every tool), then the step-up a
    host performs on the 403: to apps:write, then to apps:delete (which the 401's least-privilege default leaves
    out)."""
    server = public_url
    user = UserFactory(username="alice")
    user.set_password(PASSWORD)
    user.save()
    app = make_app(owner=user, name="Alice's budget")
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name="Test host",
        redirect_uris=[CALLBACK],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
        scope="apps:read",
    )

    async def tool_names(auth: OAuthClientProvider, mode: str) -> list[str]:
        http = httpx2.AsyncClient(auth=auth, timeout=30)
        async with http, Client(streamable_http_client(server.mcp_url, http_client=http), mode=mode) as client:
            return [tool.name for tool in (await client.list_tools()).tools]

    async def call(auth: OAuthClientProvider, name: str, arguments: dict[str, Any]) -> Any:
        http = httpx2.AsyncClient(auth=auth, timeout=30)
        async with http, Client(streamable_http_client(server.mcp_url, http_client=http), mode=MODERN) as client:
            return await client.call_tool(name, arguments)

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with NarrowingBrowser(server.base_url, login=("alice", PASSWORD), first_scope="apps:read") as browser:
            auth = OAuthClientProvider(
                server.mcp_url,
                metadata,
                storage,
                redirect_handler=browser.redirect_handler,
                callback_handler=browser.callback_handler,
            )
            seen["legacy"] = await tool_names(auth, LEGACY)
            seen["modern"] = await tool_names(auth, MODERN)
            assert storage.tokens is not None
            seen["granted"] = storage.tokens.scope
            async with httpx2.AsyncClient(timeout=10) as http:
                seen["write"] = await http.post(
                    server.mcp_url,
                    json={
                        "jsonrpc": "2.0",
                        "id": 3,
                        "method": "tools/call",
                        "params": {
                            "name": "mutate_app",
                            "arguments": {"app_id": str(app.id), "op": "add", "params": {}},
                            "_meta": {
                                "io.modelcontextprotocol/protocolVersion": MODERN,
                                "io.modelcontextprotocol/clientCapabilities": {},
                            },
                        },
                    },
                    headers={
                        "Authorization": f"Bearer {storage.tokens.access_token}",
                        "Accept": "application/json, text/event-stream",
                        "MCP-Protocol-Version": MODERN,
                        "Mcp-Method": "tools/call",
                        "Mcp-Name": "mutate_app",
                    },
                )
            # The SDK client meets the same 403, authorizes again for the union of scopes, and retries.
            seen["feedback"] = await call(auth, "send_feedback", {"app_id": str(app.id), "body": "More reports"})
            seen["after_write_step_up"] = (storage.tokens.scope, await tool_names(auth, MODERN))
            seen["delete"] = await call(auth, "delete_app", {"app_id": str(app.id), "confirm": True})
            seen["after_delete_step_up"] = storage.tokens.scope
            seen["asked"] = list(browser.asked)
            seen["consent_pages"] = list(browser.consent_pages)
        return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), timeout=180))

    assert seen["granted"] == "apps:read"
    # An OAuth host sees every tool, whatever it was granted: it can step up to any of them on the 403.
    assert seen["legacy"] == seen["modern"] == [tool.name for tool in TOOLS]
    refused = seen["write"]
    assert refused.status_code == 403
    assert refused.headers["www-authenticate"] == (
        f'Bearer error="insufficient_scope", scope="apps:write", '
        f'resource_metadata="{server.base_url}/.well-known/oauth-protected-resource/mcp"'
    )
    assert refused.json()["error"]["data"] == {"error": "insufficient_scope", "scope": "apps:write"}
    # Step-ups: each asks for what it held plus what the 403 named; the person approved each on the consent page.
    assert seen["asked"] == ["apps:read", "apps:read apps:write", "apps:read apps:write apps:delete"]
    assert len(seen["consent_pages"]) == 3
    assert "Delete your apps" not in seen["consent_pages"][1]
    assert "Delete your apps" in seen["consent_pages"][2]
    assert seen["feedback"].is_error is not True and seen["feedback"].structured_content["ok"] is True
    scope, tools = seen["after_write_step_up"]
    assert set(scope.split()) == {"apps:read", "apps:write"}
    assert tools == [tool.name for tool in TOOLS]
    assert set(seen["after_delete_step_up"].split()) == {"apps:read", "apps:write", "apps:delete"}
    assert seen["delete"].is_error is not True and seen["delete"].structured_content["deleted"] is True
    assert not App.objects.filter(pk=app.pk).exists()


@pytest.mark.parametrize("mode", MODES)
def test_from_the_bare_url_a_host_lists_delete_app_steps_up_on_its_call_and_deletes_it_confirmed(public_url, mode):
    """The Done-when of issue 24 item 1: the default 401 challenge grants apps:read apps:write (no deletion up front),
    tools/list still shows delete_app, its call meets the 403 for apps:delete, the SDK authorizes again, the person
    approves a consent page that says it grants deletion, and the retried call asks for confirmation and deletes."""
    server = public_url
    user = UserFactory(username="alice")
    user.set_password(PASSWORD)
    user.save()
    app = make_app(owner=user, name="Alice's budget")
    kept = make_app(owner=user, name="Alice's notes")
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name="Test host",
        redirect_uris=[CALLBACK],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )
    prompts: list[str] = []

    async def confirm(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        prompts.append(params.message)
        return types.ElicitResult(action="accept", content={"confirm": True})

    async def scenario() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with SignedInBrowser(server.base_url, login=("alice", PASSWORD)) as browser:
            auth = OAuthClientProvider(
                server.mcp_url,
                metadata,
                storage,
                redirect_handler=browser.redirect_handler,
                callback_handler=browser.callback_handler,
            )
            http = httpx2.AsyncClient(auth=auth, timeout=30)
            transport = streamable_http_client(server.mcp_url, http_client=http)
            async with http, Client(transport, mode=mode, elicitation_callback=confirm) as client:
                seen["tools"] = [tool.name for tool in (await client.list_tools()).tools]
                assert storage.tokens is not None
                seen["granted"] = storage.tokens.scope
                seen["delete"] = await client.call_tool("delete_app", {"app_id": str(app.id)})
                seen["stepped_up"] = storage.tokens.scope
            seen["consent_pages"] = [" ".join(re.sub("<[^>]+>", "", page).split()) for page in browser.consent_pages]
        return seen

    seen = asyncio.run(asyncio.wait_for(scenario(), timeout=150))

    assert set(seen["granted"].split()) == {"apps:read", "apps:write"}
    assert "delete_app" in seen["tools"] and "mutate_app" in seen["tools"]
    first, step_up = seen["consent_pages"]
    assert "This grants deletion" not in first
    assert "This grants deletion: Test host will be able to delete your apps permanently" in step_up
    assert set(seen["stepped_up"].split()) == {"apps:read", "apps:write", "apps:delete"}
    assert len(prompts) == 1 and "Alice's budget" in prompts[0]
    assert seen["delete"].is_error is not True, seen["delete"]
    assert seen["delete"].structured_content == {"ok": True, "id": str(app.id), "deleted": True}
    assert not App.objects.filter(pk=app.pk).exists()
    assert App.objects.filter(pk=kept.pk).exists()


def test_the_sdk_client_connects_to_an_apps_own_server_through_oauth_from_its_bare_url(public_url):
    """/mcp/apps/<id> answers 401 pointing at /mcp's resource metadata; the SDK accepts it (the app's URL lies under
    the resource), runs the flow with the default challenge, and calls the app's routes as tools."""
    from apps_registry.services.definitions import app_definition_save
    from tests.mcp_tools.test_mutate_app import DEFINITION

    server = public_url
    user = UserFactory(username="alice")
    session = DjangoClient()
    session.force_login(user)
    app = app_definition_save(actor=user, definition=DEFINITION)
    url = f"{server.base_url}/mcp/apps/{app.id}"
    storage = MemoryStorage()
    metadata = OAuthClientMetadata(
        client_name="Test host",
        redirect_uris=[CALLBACK],
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="none",
    )

    async def scenario() -> tuple[list[str], Any, Any]:
        async with SignedInBrowser(server.base_url, session.cookies["sessionid"].value) as browser:
            auth = OAuthClientProvider(
                url,
                metadata,
                storage,
                redirect_handler=browser.redirect_handler,
                callback_handler=browser.callback_handler,
            )
            http = httpx2.AsyncClient(auth=auth, timeout=30)
            async with http, Client(streamable_http_client(url, http_client=http), mode=MODERN) as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                added = await client.call_tool("add_expense", {"amount": 3.5, "category": "tea"})
                counted = await client.call_tool("count_expenses", {})
            return tools, added, counted

    tools, added, counted = asyncio.run(asyncio.wait_for(scenario(), timeout=120))

    assert tools == ["add_expense", "broken", "count_expenses", "rename_expense"]
    assert added.structured_content["ok"] is True
    assert counted.structured_content == {"ok": True, "value": {"n": 1}}
    assert AccessToken.objects.get(user=user).resource == [f"{server.base_url}/mcp"]
