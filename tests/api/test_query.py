"""`limit` of the list endpoints: ASCII digits only. `str.isdigit` also passes "²", which
`int` refuses (that was a 500), and Arabic-Indic digits, which `int` reads (an invalid request
that was served)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.admin.token import hash_admin_token, new_admin_token
from gateway.api.query import page_limit
from gateway.errors import ValidationFailed
from tests.api.support import InProcessApp, in_process_app

pytestmark = [
    pytest.mark.filterwarnings("ignore::litestar.exceptions.LitestarDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Deprecated 'query' parameter:DeprecationWarning"),
]

NOT_ASCII_DIGITS = ["²", "\u0661", "\uff11", "1\u0660"]


@pytest.mark.parametrize("value", [*NOT_ASCII_DIGITS, "", "0", "101", "-1", "1.5", " 1"])
def test_page_limit_refuses_anything_but_1_to_high_in_ascii_digits(value: str) -> None:
    with pytest.raises(ValidationFailed) as refused:
        page_limit(value, high=100)
    assert refused.value.details[0].field == "limit"


def test_page_limit_reads_ascii_digits() -> None:
    assert [page_limit(v, high=100) for v in ("1", "07", "100")] == [1, 7, 100]


def test_list_endpoints_answer_422_for_unicode_digits(tmp_path: Path) -> None:
    token = new_admin_token()

    async def main() -> None:
        async with in_process_app(tmp_path, admin_token_hash=hash_admin_token(token)) as gw:
            await _check(gw, token)

    asyncio.run(main())


async def _check(gw: InProcessApp, token: str) -> None:
    admin = {"Authorization": f"Bearer {token}"}
    for value in NOT_ASCII_DIGITS:
        for path, headers in (
            ("/v1/tasks", gw.auth()),
            ("/v1/wallet/ledger", gw.auth()),
            ("/admin/v1/tasks", admin),
            ("/admin/v1/tenants/default/ledger", admin),
        ):
            response = await gw.client.get(path, params={"limit": value}, headers=headers)
            assert response.status_code == 422, (path, value, response.text)
            assert response.json()["error"]["details"][0]["field"] == "limit"
