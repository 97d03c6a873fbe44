"""The permission battery every page and endpoint gets (after NetBox's shared view-test mixin).

    assert_page_permissions(client, url, allowed=[member], others_team_user=outsider, forbidden=[viewer])

checks, in order: anonymous → redirect to the login page (or 401/403 for an API); a user of another team → 404;
each forbidden user (a viewer writing, a non-staff user on the console) → 403; each allowed user → 200 or 302.
Writes run once per allowed user, so give one allowed user (or an idempotent write) when the order matters.
"""

from collections.abc import Iterable
from urllib.parse import urlsplit

from django.conf import settings
from django.shortcuts import resolve_url

ANONYMOUS_API_STATUSES = (401, 403)


def request_as(client, user, url: str, *, method: str = "get", data=None, **extra):
    """One request as `user` (None: anonymous), leaving the client logged out afterwards."""
    client.logout()
    if user is not None:
        client.force_login(user)
    call = getattr(client, method.lower())
    response = call(url, data=data, **extra) if data is not None else call(url, **extra)
    client.logout()
    return response


def assert_login_redirect(response, url: str) -> None:
    assert response.status_code == 302, f"anonymous {url}: expected a login redirect, got {response.status_code}"
    location = urlsplit(response["Location"])
    assert location.path == resolve_url(settings.LOGIN_URL), f"anonymous {url} redirected to {response['Location']}"


def assert_page_permissions(
    client,
    url: str,
    *,
    method: str = "get",
    data=None,
    allowed: Iterable = (),
    others_team_user=None,
    forbidden: Iterable = (),
    allowed_statuses: tuple[int, ...] = (200, 302),
    api: bool = False,
) -> list:
    """Run the battery; returns the allowed users' responses for further assertions."""
    response = request_as(client, None, url, method=method, data=data)
    if api:
        assert response.status_code in ANONYMOUS_API_STATUSES, f"anonymous {url}: {response.status_code}"
    else:
        assert_login_redirect(response, url)

    if others_team_user is not None:
        response = request_as(client, others_team_user, url, method=method, data=data)
        assert response.status_code == 404, (
            f"{others_team_user} (another team) {method.upper()} {url}: expected 404, got {response.status_code}")

    for user in forbidden:
        response = request_as(client, user, url, method=method, data=data)
        assert response.status_code == 403, (
            f"{user} {method.upper()} {url}: expected 403, got {response.status_code}")

    responses = []
    for user in allowed:
        response = request_as(client, user, url, method=method, data=data)
        assert response.status_code in allowed_statuses, (
            f"{user} {method.upper()} {url}: expected one of {allowed_statuses}, got {response.status_code}")
        responses.append(response)
    return responses


class PagePermissionCases:
    """Mixin for a test class: define the fixtures `page_url` and `page_users` (keyword arguments of
    assert_page_permissions: 'allowed', 'others_team_user', 'forbidden', ...); set `method` and `data` for writes."""

    method = "get"
    data = None

    def test_permissions(self, client, page_url, page_users):
        assert_page_permissions(client, page_url, method=self.method, data=self.data, **page_users)
