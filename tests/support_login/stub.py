#!/usr/bin/env python3
"""Loopback stubs of the OIDC token services settings-image logs in with.

One process plays, each on its own path, what cannot run here: GitHub's
runner ID-token endpoint (it mints RS256 JWTs with `openssl dgst`), AWS STS
and ECR, Google STS and IAM Credentials, Microsoft Entra, Docker's identity
service, and, on the registry host itself, ACR's /oauth2/exchange, Quay's
robot federation and JFrog's OIDC token endpoint. Every other path is
proxied to the real distribution registry (`upstream`), so the credentials
an exchange hands out authenticate a real push.

Two hostile turns a test can ask for: `away` (a list of route prefixes, in
the config or, read on every request, in the JSON file `away_file`) answers
those routes with a 307 redirect to the same path on another host,
127.0.0.2, whose server logs everything it receives (route `elsewhere`);
and `hosts` makes the stub an HTTP proxy for named hosts: a request in
absolute form (`GET http://ghcr.io/v2/`) is logged (route `host`, with its
Authorization) and passed to the upstream `hosts` maps `HOST/PATH` or
`HOST` to, so a test can play ghcr.io and a foreign token service (`self`:
the stub itself, for a provider's registry host such as
`123456789012.dkr.ecr.eu-west-1.amazonaws.com`).

Each endpoint checks the request as the real service documents it (method,
path, grant type, fields) and verifies the ID token the way a provider
does: RS256 signature against the issuer's JWKS (recomputed here with
Python's own big integers, independent of the code under test), issuer,
audience, expiry and subject. ECR recomputes the SigV4 signature with
`hmac`. Answers follow the providers' documented shapes. Every exchange is
logged as one JSON line (`log`), so tests can see which checks ran.

  stub.py serve CONFIG.json     prints "PORT <n>" and serves until killed
  stub.py mint KEY KID ISS AUD SUB EXP_IN_SECONDS   prints a JWT
"""

import base64
import datetime
import hashlib
import hmac
import http.client
import json
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ISSUER = "https://token.actions.githubusercontent.com"


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def unb64url(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


def mint(key, kid, iss, aud, sub, exp_in):
    now = int(time.time())
    header = {"alg": "RS256", "typ": "JWT", "kid": kid}
    claims = {
        "iss": iss,
        "aud": aud,
        "sub": sub,
        "iat": now,
        "nbf": now - 5,
        "exp": now + exp_in,
        "repository": "acme/shop",
        "ref": "refs/heads/main",
        "jti": hashlib.sha256(str(time.time_ns()).encode()).hexdigest()[:16],
    }
    signing_input = b64url(json.dumps(header).encode()) + "." + b64url(json.dumps(claims).encode())
    sig = subprocess.run(
        ["openssl", "dgst", "-sha256", "-sign", key],
        input=signing_input.encode(),
        capture_output=True,
        check=True,
    ).stdout
    return signing_input + "." + b64url(sig)


# DER DigestInfo prefix of SHA-256 (RFC 8017, section 9.2, note 1).
SHA256_PREFIX = bytes.fromhex("3031300d060960864801650304020105000420")


def rs256_ok(jwks, jwt):
    """EMSA-PKCS1-v1_5 verification with the JWKS key named by `kid`."""
    try:
        h, p, s = jwt.split(".")
        header = json.loads(unb64url(h))
    except Exception:
        return False, "not a JWT"
    if header.get("alg") != "RS256":
        return False, "alg is not RS256"
    key = next((k for k in jwks["keys"] if k.get("kid") == header.get("kid")), None)
    if key is None:
        return False, "no JWKS key for kid %r" % header.get("kid")
    n = int.from_bytes(unb64url(key["n"]), "big")
    e = int.from_bytes(unb64url(key["e"]), "big")
    k = (n.bit_length() + 7) // 8
    sig = int.from_bytes(unb64url(s), "big")
    em = pow(sig, e, n).to_bytes(k, "big")
    digest = hashlib.sha256((h + "." + p).encode()).digest()
    t = SHA256_PREFIX + digest
    expected = b"\x00\x01" + b"\xff" * (k - len(t) - 3) + b"\x00" + t
    if not hmac.compare_digest(em, expected):
        return False, "signature does not verify against the issuer's JWKS"
    return True, "signature verified"


class Refusal(Exception):
    def __init__(self, status, body, ctype="application/json"):
        super().__init__(body)
        self.status, self.body, self.ctype = status, body, ctype


def sigv4_signature(secret, method, path, query, headers, signed, body, amzdate, scope):
    canonical_headers = "".join(
        "%s:%s\n" % (h, " ".join(headers.get(h, "").split())) for h in signed
    )
    canonical = "\n".join(
        [
            method,
            urllib.parse.quote(path, safe="/~"),
            query,
            canonical_headers,
            ";".join(signed),
            hashlib.sha256(body).hexdigest(),
        ]
    )
    to_sign = "\n".join(
        ["AWS4-HMAC-SHA256", amzdate, scope, hashlib.sha256(canonical.encode()).hexdigest()]
    )
    date, region, service, _ = scope.split("/")
    k = ("AWS4" + secret).encode()
    for part in (date, region, service, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    return hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()


class Stub:
    def __init__(self, cfg):
        self.cfg = cfg
        self.jwks = json.load(open(cfg["jwks"]))
        self.lock = threading.Lock()
        self.counts = {}

    def away(self):
        """The route prefixes answered with a redirect to the other host."""
        path = self.cfg.get("away_file")
        try:
            with open(path) as f:
                return json.load(f)
        except (TypeError, OSError):
            return self.cfg.get("away", [])

    def log(self, entry):
        with self.lock:
            with open(self.cfg["log"], "a") as f:
                f.write(json.dumps(entry) + "\n")

    def next_secret(self, name, values):
        """The n-th secret handed out by `name` (the last one repeats)."""
        with self.lock:
            i = self.counts.get(name, 0)
            self.counts[name] = i + 1
        return values[min(i, len(values) - 1)]

    def verify(self, jwt, audience, checks, error):
        ok, why = rs256_ok(self.jwks, jwt)
        if not ok:
            raise error(why)
        checks.append("jwks")
        claims = json.loads(unb64url(jwt.split(".")[1]))
        if claims.get("iss") != ISSUER:
            raise error("untrusted issuer %s" % claims.get("iss"))
        if claims.get("exp", 0) <= time.time():
            raise error("token expired")
        auds = claims.get("aud")
        auds = auds if isinstance(auds, list) else [auds]
        if audience is not None and audience not in auds:
            raise error("Incorrect token audience: %s" % ", ".join(map(str, auds)))
        checks.append("aud=%s" % audience)
        want_sub = self.cfg.get("sub")
        if want_sub and claims.get("sub") != want_sub:
            raise error("subject %s does not match" % claims.get("sub"))
        checks.append("sub")
        return claims


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    stub = None

    def log_message(self, *args):
        pass

    # ------------------------------------------------------------ plumbing

    def body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def answer(self, status, body, ctype="application/json", extra=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
        if isinstance(body, str):
            body = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in extra:
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def form(self, raw):
        return {k: v[0] for k, v in urllib.parse.parse_qs(raw.decode(), keep_blank_values=True).items()}

    def expect(self, cond, status, body, ctype="application/json"):
        if not cond:
            raise Refusal(status, body, ctype)

    def dispatch(self):
        split = urllib.parse.urlsplit(self.path)
        if split.scheme and split.netloc:
            return self.as_host(split)
        path = split.path
        cfg = self.stub.cfg
        for prefix in self.stub.away():
            if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
                self.body()
                self.stub.log({"route": "away", "path": path})
                location = "http://%s%s" % (self.stub.elsewhere, self.path)
                self.answer(307, "", "text/plain", extra=[("Location", location)])
                return
        if path.startswith("/hang/"):
            # Held unanswered until the client hangs up or `hang_seconds`
            # pass; the log says which ended it.
            self.body()
            self.connection.settimeout(cfg.get("hang_seconds", 120))
            try:
                hung_up = self.connection.recv(1) == b""
            except TimeoutError:
                hung_up = False
            self.stub.log({"route": "hang", "client_hung_up": hung_up})
            self.close_connection = True
            return
        routes = [
            ("/idtoken", self.idtoken),
            ("/sts/", self.aws_sts),
            ("/ecr/", self.aws_ecr),
            ("/gcp-sts/v1/token", self.gcp_sts),
            ("/gcp-iam/v1/projects/-/serviceAccounts/", self.gcp_iam),
            ("/azure/", self.azure),
            ("/oauth2/exchange", self.acr_exchange),
            ("/docker/oauth/token", self.dockerhub),
            ("/oauth2/federation/robot/token", self.quay),
            ("/access/api/v1/oidc/token", self.jfrog),
        ]
        for prefix, handler in routes:
            if path == prefix or (prefix.endswith("/") and path.startswith(prefix)):
                checks = []
                try:
                    handler(path, checks)
                    self.stub.log({"route": prefix, "ok": True, "checks": checks})
                except Refusal as r:
                    self.stub.log({"route": prefix, "ok": False, "checks": checks, "status": r.status})
                    self.answer(r.status, r.body, r.ctype)
                return
        self.proxy()

    do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = do_DELETE = lambda self: self.dispatch()

    def as_host(self, split):
        """A request sent through this stub as a proxy: for the host in its URL."""
        host = split.netloc
        hosts = self.stub.cfg.get("hosts", {})
        self.stub.log({"route": "host", "host": host, "method": self.command, "path": split.path, "authorization": self.headers.get("Authorization", "")})
        upstream = hosts.get(host + split.path) or hosts.get(host)
        if upstream == "self":
            # A provider's registry host played by this stub: its own
            # routes (ACR's /oauth2/exchange ...) and the registry behind.
            upstream = "127.0.0.1:%d" % self.server.server_address[1]
        if upstream is None:
            self.body()
            self.answer(502, {"message": "no such host here"})
            return
        self.proxy(upstream, split.path + ("?" + split.query if split.query else ""))

    def proxy(self, upstream=None, target=None):
        body = self.body()
        if upstream is None:
            self.stub.log({"route": "proxy", "method": self.command, "authorization": self.headers.get("Authorization", "")})
        conn = http.client.HTTPConnection(upstream or self.stub.cfg["upstream"], timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("transfer-encoding", "connection", "proxy-connection")}
        if body or self.command in ("PUT", "PATCH", "POST"):
            headers["Content-Length"] = str(len(body))
        conn.request(self.command, target or self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(k, v)
        length = resp.getheader("Content-Length")
        self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    # ------------------------------------------------------- GitHub runner

    def idtoken(self, path, checks):
        cfg = self.stub.cfg
        self.expect(self.command == "GET", 405, {"message": "GET only"})
        auth = self.headers.get("Authorization", "")
        self.expect(auth == "bearer " + cfg["request_token"], 401, {"message": "Unauthorized"})
        checks.append("request-token")
        q = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        aud = q.get("audience", ["https://github.com/acme"])[0]
        checks.append("aud=%s" % aud)
        jwt = mint(cfg["key"], cfg["kid"], ISSUER, aud, cfg.get("sub", "repo:acme/shop:ref:refs/heads/main"), cfg.get("exp_in", 300))
        self.stub.log({"route": "minted", "jwt": jwt})
        self.answer(200, {"count": 1, "value": jwt})

    # ----------------------------------------------------------------- AWS

    def aws_error(self, status, code, message):
        xml = (
            '<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type>'
            "<Code>%s</Code><Message>%s</Message></Error><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ErrorResponse>"
            % (code, message.replace("&", "&amp;").replace("<", "&lt;"))
        )
        return Refusal(status, xml, "text/xml")

    def aws_sts(self, path, checks):
        a = self.stub.cfg["aws"]
        self.expect(self.command == "POST", 405, "")
        self.expect(self.headers.get("Content-Type", "").startswith("application/x-www-form-urlencoded"), 400, "")
        f = self.form(self.body())
        if f.get("Action") != "AssumeRoleWithWebIdentity" or f.get("Version") != "2011-06-15":
            raise self.aws_error(400, "InvalidAction", "unknown action")
        checks.append("action")
        if a.get("deny"):
            # A hostile or careless service that echoes what it was sent.
            raise self.aws_error(
                403,
                "AccessDenied",
                "Not authorized to perform sts:AssumeRoleWithWebIdentity with token %s" % f.get("WebIdentityToken"),
            )
        if f.get("RoleArn") != a["role_arn"]:
            raise self.aws_error(403, "AccessDenied", "Not authorized to perform sts:AssumeRoleWithWebIdentity")
        if not f.get("RoleSessionName"):
            raise self.aws_error(400, "ValidationError", "RoleSessionName is required")

        def bad(why):
            code = "ExpiredTokenException" if "expired" in why else "InvalidIdentityToken"
            return self.aws_error(400, code, why)

        self.stub.verify(f.get("WebIdentityToken", ""), "sts.amazonaws.com", checks, bad)
        exp = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        xml = (
            '<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
            "<AssumeRoleWithWebIdentityResult>"
            "<SubjectFromWebIdentityToken>repo:acme/shop:ref:refs/heads/main</SubjectFromWebIdentityToken>"
            "<Audience>sts.amazonaws.com</Audience>"
            "<AssumedRoleUser><Arn>%s/%s</Arn><AssumedRoleId>AROACLKWSDQRAOEXAMPLE:%s</AssumedRoleId></AssumedRoleUser>"
            "<Credentials><SessionToken>%s</SessionToken><SecretAccessKey>%s</SecretAccessKey>"
            "<Expiration>%s</Expiration><AccessKeyId>%s</AccessKeyId></Credentials>"
            "<Provider>token.actions.githubusercontent.com</Provider>"
            "</AssumeRoleWithWebIdentityResult>"
            "<ResponseMetadata><RequestId>ad4156e9-bce1-11e2-82e6-6b6efEXAMPLE</RequestId></ResponseMetadata>"
            "</AssumeRoleWithWebIdentityResponse>"
            % (a["role_arn"], f["RoleSessionName"], f["RoleSessionName"], a["session_token"], a["secret_key"], exp, a["access_key"])
        )
        self.answer(200, xml, "text/xml")

    def aws_ecr(self, path, checks):
        a = self.stub.cfg["aws"]
        body = self.body()
        self.expect(self.command == "POST", 405, "")
        deny = lambda msg: Refusal(403, {"__type": "AccessDeniedException", "message": msg}, "application/x-amz-json-1.1")
        self.expect(
            self.headers.get("X-Amz-Target") == "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken",
            400,
            {"__type": "UnknownOperationException"},
        )
        self.expect(self.headers.get("Content-Type") == "application/x-amz-json-1.1", 400, {"__type": "SerializationException"})
        checks.append("target")
        auth = self.headers.get("Authorization", "")
        if not auth.startswith("AWS4-HMAC-SHA256 "):
            raise deny("Missing Authentication Token")
        parts = dict(p.strip().split("=", 1) for p in auth[len("AWS4-HMAC-SHA256 "):].split(","))
        cred = parts["Credential"].split("/", 1)
        if cred[0] != a["access_key"]:
            raise deny("The security token included in the request is invalid.")
        scope = cred[1]
        if scope.split("/")[1:] != [a["region"], "ecr", "aws4_request"]:
            raise deny("Credential should be scoped to a valid region/service: %s" % scope)
        if self.headers.get("X-Amz-Security-Token") != a["session_token"]:
            raise deny("The security token included in the request is invalid.")
        signed = parts["SignedHeaders"].split(";")
        for must in ("host", "x-amz-date", "x-amz-target", "x-amz-security-token"):
            if must not in signed:
                raise deny("%s is not signed" % must)
        headers = {k.lower(): v for k, v in self.headers.items()}
        split = urllib.parse.urlsplit(self.path)
        want = sigv4_signature(
            a["secret_key"], self.command, split.path, split.query, headers, signed, body, headers["x-amz-date"], scope
        )
        if not hmac.compare_digest(want, parts["Signature"]):
            raise deny("The request signature we calculated does not match the signature you provided.")
        checks.append("sigv4")
        password = self.stub.next_secret("ecr", a["passwords"])
        token = base64.b64encode(("AWS:" + password).encode()).decode()
        self.answer(
            200,
            {
                "authorizationData": [
                    {
                        "authorizationToken": token,
                        "expiresAt": time.time() + 43200,
                        "proxyEndpoint": "https://123456789012.dkr.ecr.%s.amazonaws.com" % a["region"],
                    }
                ]
            },
            "application/x-amz-json-1.1",
        )

    # -------------------------------------------------------------- Google

    def gcp_sts(self, path, checks):
        g = self.stub.cfg["gcp"]
        self.expect(self.command == "POST", 405, {})
        req = json.loads(self.body() or b"{}")
        bad = lambda why: Refusal(400, {"error": "invalid_grant", "error_description": why})
        if req.get("grantType") != "urn:ietf:params:oauth:grant-type:token-exchange":
            raise Refusal(400, {"error": "unsupported_grant_type"})
        if req.get("subjectTokenType") != "urn:ietf:params:oauth:token-type:jwt":
            raise Refusal(400, {"error": "invalid_request", "error_description": "subjectTokenType"})
        if req.get("requestedTokenType") != "urn:ietf:params:oauth:token-type:access_token":
            raise Refusal(400, {"error": "invalid_request", "error_description": "requestedTokenType"})
        if req.get("audience") != "//iam.googleapis.com/" + g["provider"]:
            raise Refusal(400, {"error": "invalid_target", "error_description": "The target service indicated by the \"audience\" parameters is invalid."})
        if "cloud-platform" not in req.get("scope", ""):
            raise Refusal(400, {"error": "invalid_scope"})
        checks.append("grant")
        self.stub.verify(
            req.get("subjectToken", ""),
            "https://iam.googleapis.com/" + g["provider"],
            checks,
            lambda why: bad("The audience in ID Token does not match the expected audience. " + why if "audience" in why else why),
        )
        self.answer(
            200,
            {
                "access_token": g["federated"],
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "token_type": "Bearer",
                "expires_in": 3600,
            },
        )

    def gcp_iam(self, path, checks):
        g = self.stub.cfg["gcp"]
        self.expect(self.command == "POST", 405, {})
        want = "/gcp-iam/v1/projects/-/serviceAccounts/%s:generateAccessToken" % g["service_account"]
        self.expect(path == want, 404, {"error": {"code": 404, "message": "Not found; Gaia id not found for email", "status": "NOT_FOUND"}})
        self.expect(
            self.headers.get("Authorization") == "Bearer " + g["federated"],
            401,
            {"error": {"code": 401, "message": "Request had invalid authentication credentials.", "status": "UNAUTHENTICATED"}},
        )
        req = json.loads(self.body() or b"{}")
        self.expect(any("cloud-platform" in s for s in req.get("scope", [])), 400, {"error": {"code": 400, "message": "scope"}})
        checks.append("impersonation")
        self.answer(200, {"accessToken": g["token"], "expireTime": "2026-12-01T00:00:00Z"})

    # --------------------------------------------------------------- Azure

    def azure(self, path, checks):
        z = self.stub.cfg["azure"]
        self.expect(self.command == "POST", 405, {})
        self.expect(path == "/azure/%s/oauth2/v2.0/token" % z["tenant"], 400, {"error": "invalid_tenant", "error_description": "AADSTS90002: Tenant not found."})
        f = self.form(self.body())
        err = lambda code, why: Refusal(400 if code != "invalid_client" else 401, {"error": code, "error_description": why, "error_codes": [70021]})
        if f.get("grant_type") != "client_credentials":
            raise err("unsupported_grant_type", "AADSTS70003")
        if f.get("client_id") != z["client"]:
            raise err("unauthorized_client", "AADSTS700016: Application not found in the directory.")
        if f.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer":
            raise err("invalid_request", "AADSTS50027: client_assertion_type")
        if not f.get("scope", "").endswith("/.default"):
            raise err("invalid_scope", "AADSTS1002012")
        checks.append("grant")
        self.stub.verify(
            f.get("client_assertion", ""),
            "api://AzureADTokenExchange",
            checks,
            lambda why: err("invalid_client", "AADSTS70021: No matching federated identity record found for presented assertion. " + why),
        )
        self.answer(200, {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599, "access_token": z["aad_token"]})

    def acr_exchange(self, path, checks):
        z = self.stub.cfg["azure"]
        self.expect(self.command == "POST", 405, {})
        f = self.form(self.body())
        self.expect(f.get("grant_type") == "access_token", 400, {"errors": [{"code": "UNSUPPORTED", "message": "grant_type"}]})
        self.expect(f.get("service") == self.headers.get("Host"), 400, {"errors": [{"code": "INVALID", "message": "service"}]})
        self.expect(f.get("tenant") == z["tenant"], 400, {"errors": [{"code": "INVALID", "message": "tenant"}]})
        self.expect(f.get("access_token") == z["aad_token"], 401, {"errors": [{"code": "UNAUTHORIZED", "message": "invalid access token"}]})
        checks.append("exchange")
        self.answer(200, {"refresh_token": z["refresh_token"]})

    # ---------------------------------------------------------- Docker Hub

    def dockerhub(self, path, checks):
        d = self.stub.cfg["dockerhub"]
        self.expect(self.command == "POST", 405, {})
        f = self.form(self.body())
        if f.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" or f.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token":
            raise Refusal(400, {"error": "unsupported_grant_type"})
        if f.get("connection_id") != d["connection"]:
            raise Refusal(403, {"error": "access_denied", "error_description": "unknown connection"})
        if not 300 <= int(f.get("expires_in", "0")) <= 3600:
            raise Refusal(400, {"error": "invalid_request", "error_description": "expires_in"})
        checks.append("grant")
        self.stub.verify(f.get("subject_token", ""), "https://identity.docker.com", checks, lambda why: Refusal(403, {"error": "access_denied", "error_description": why}))
        self.answer(200, {"access_token": d["token"], "token_type": "Bearer", "expires_in": int(f["expires_in"])})

    # ---------------------------------------------------------------- Quay

    def quay(self, path, checks):
        q = self.stub.cfg["quay"]
        self.expect(self.command == "GET", 405, {})
        auth = self.headers.get("Authorization", "")
        self.expect(auth.startswith("Basic "), 401, {"error": "missing basic auth"})
        robot, _, jwt = base64.b64decode(auth[6:]).decode().partition(":")
        # A careless service that echoes the request's header when it refuses.
        self.expect(not q.get("echo"), 401, {"error": "Robot federation refused for Authorization: %s" % auth})
        self.expect(robot == q["robot"], 401, {"error": "Could not find robot %s" % robot})
        checks.append("robot")
        self.stub.verify(jwt, q.get("audience"), checks, lambda why: Refusal(401, {"error": "Robot federation failed: " + why}))
        self.answer(200, {"token": q["token"]})

    # --------------------------------------------------------------- JFrog

    def jfrog(self, path, checks):
        j = self.stub.cfg["jfrog"]
        self.expect(self.command == "POST", 405, {})
        req = json.loads(self.body() or b"{}")
        if req.get("grant_type") != "urn:ietf:params:oauth:grant-type:token-exchange" or req.get("subject_token_type") != "urn:ietf:params:oauth:token-type:id_token":
            raise Refusal(400, {"errors": [{"code": "BAD_REQUEST", "message": "grant_type"}]})
        if req.get("provider_name") != j["provider"]:
            raise Refusal(404, {"errors": [{"code": "NOT_FOUND", "message": "OIDC provider not found"}]})
        checks.append("grant")
        self.stub.verify(req.get("subject_token", ""), j.get("audience"), checks, lambda why: Refusal(401, {"errors": [{"code": "UNAUTHORIZED", "message": why}]}))
        self.answer(
            200,
            {
                "access_token": j["token"],
                "token_type": "Bearer",
                "expires_in": 3600,
                "scope": "applied-permissions/user",
                "issued_token_type": "urn:ietf:params:oauth:token-type:access_token",
                "username": j["username"],
            },
        )


class Elsewhere(Handler):
    """Another host (127.0.0.2): logs every request it gets, whole."""

    def dispatch(self):
        body = self.body()
        self.stub.log(
            {
                "route": "elsewhere",
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers.items()),
                "body": body.decode("latin-1"),
            }
        )
        self.answer(404, {"message": "nothing here"})

    do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = do_DELETE = lambda self: self.dispatch()


def serve(config_path):
    cfg = json.load(open(config_path))
    Handler.stub = Stub(cfg)
    elsewhere = ThreadingHTTPServer(("127.0.0.2", 0), Elsewhere)
    elsewhere.daemon_threads = True
    threading.Thread(target=elsewhere.serve_forever, daemon=True).start()
    Handler.stub.elsewhere = "127.0.0.2:%d" % elsewhere.server_address[1]
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print("PORT %d" % server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2])
    elif sys.argv[1] == "mint":
        print(mint(sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6], int(sys.argv[7])))
    else:
        sys.exit("usage: stub.py serve CONFIG | mint KEY KID ISS AUD SUB EXP_IN")
