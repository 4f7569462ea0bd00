"""A fake of the two AWS metadata endpoints botocore's credential chain asks: the container
credentials endpoint (ECS, EKS Pod Identity) and the EC2 instance metadata service (IMDSv2).
A real aiohttp server on 127.0.0.1 and a free port; point botocore at it with

    AWS_CONTAINER_CREDENTIALS_FULL_URI = fake.container_url   (+ AWS_CONTAINER_AUTHORIZATION_TOKEN)
    AWS_EC2_METADATA_SERVICE_ENDPOINT  = fake.imds_url

Each hands out the next of `credentials` (rotating keys), valid for `lifetime` seconds, and
counts the requests it served (`container_requests`, `imds_requests`), so a test sees when
botocore came back to renew them. With `echo` the container endpoint refuses every request
with 401, quoting the `Authorization` token it was sent.
"""

from __future__ import annotations

import datetime
from collections import deque

from aiohttp import web

from tests.fakes.server import FakeServer

__all__ = ["FakeAwsMetadata"]

_ROLE = "gateway-role"


class FakeAwsMetadata(FakeServer[str, None]):
    base_path = ""
    thread_name = "fake-aws-metadata"

    def __init__(
        self,
        credentials: list[tuple[str, str, str]],
        *,
        lifetime: float = 3600.0,
        authorization: str | None = None,
    ) -> None:
        super().__init__()
        self.credentials = deque(credentials)
        self.lifetime = lifetime
        self.authorization = authorization  # what the container endpoint wants, if anything
        self.container_requests = 0
        self.imds_requests = 0
        self.echo = False
        self._imds_token = "imds-session-token"

    @property
    def container_url(self) -> str:
        return self.base_url + "/v2/credentials/task"

    @property
    def imds_url(self) -> str:
        return self.base_url + "/"

    def routes(self, app: web.Application) -> None:
        app.router.add_get("/v2/credentials/task", self._container)
        app.router.add_put("/latest/api/token", self._imds_session)
        app.router.add_get("/latest/meta-data/iam/security-credentials/", self._imds_roles)
        app.router.add_get("/latest/meta-data/iam/security-credentials/{role}", self._imds_role)

    def _next(self) -> dict[str, str]:
        key, secret, token = self.credentials[0]
        if len(self.credentials) > 1:
            self.credentials.popleft()
        expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=self.lifetime)
        return {
            "AccessKeyId": key,
            "SecretAccessKey": secret,
            "Token": token,
            "Expiration": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }

    async def _container(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        given = request.headers.get("Authorization")
        if self.echo:
            return web.json_response({"message": f"unauthorized token {given}"}, status=401)
        if self.authorization is not None and given != self.authorization:
            return web.json_response({"message": "unauthorized"}, status=401)
        self.container_requests += 1
        return web.json_response(
            {**self._next(), "RoleArn": f"arn:aws:iam::123456789012:role/{_ROLE}"}
        )

    async def _imds_session(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        return web.Response(text=self._imds_token)

    def _imds_refused(self, request: web.Request) -> web.Response | None:
        if request.headers.get("X-aws-ec2-metadata-token") != self._imds_token:
            return web.Response(status=401)
        return None

    async def _imds_roles(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        return self._imds_refused(request) or web.Response(text=_ROLE)

    async def _imds_role(self, request: web.Request) -> web.Response:
        self.requests.append(request.path)
        refused = self._imds_refused(request)
        if refused is not None:
            return refused
        if request.match_info["role"] != _ROLE:
            return web.Response(status=404)
        self.imds_requests += 1
        return web.json_response({"Code": "Success", "Type": "AWS-HMAC", **self._next()})
