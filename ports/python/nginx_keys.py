"""Key evaluation: the bytes nginx hashes for a ``hash`` expression, from a raw HTTP/1.x request.

An independent port written from docs/nginx-algorithm.md §12 (12.1-12.6) only: the request line and the URI
(§12.2), the host (§12.3), header lines, cookies and arguments (§12.4), addresses (§12.5), with the version
history of §12.6. Standard library only.

Modelled variables: $request_uri $uri $document_uri $args $query_string $is_args $arg_NAME $http_NAME
$cookie_NAME $host $content_type $remote_addr $binary_remote_addr $remote_port $server_addr $server_port
$server_name $scheme $request_method $request. Not modelled (refused by name with ``Unsupported``): $hostname
(machine-dependent), ``map`` variables and every other variable.

``keys_replay.py`` replays vectors/keys/v1/keys.json with it.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field


class BadRequest(Exception):
    """nginx refuses the request before any key is computed; ``status`` is its answer (400 or 505)."""

    def __init__(self, status: int, why: str):
        super().__init__(f"{status}: {why}")
        self.status = status


class Unsupported(Exception):
    """A variable this port does not model."""


def parse_version(text: str) -> tuple:
    """``1.26.3`` (or a build label ``1.26.3-musl``) as a tuple."""
    return tuple(int(p) for p in text.split("-", 1)[0].split("."))


@dataclass(frozen=True)
class KeyRules:
    """The §12.6 table: what changed in which release."""

    empty_path_query: bool = False       # 1.19.6: http://h?q accepted, path "/"
    strict_request_line: bool = False    # 1.21.1: spaces/control characters refused in target and Host
    headers_joined: bool = False         # 1.23.0: repeated headers joined with ", " in $http_NAME
    strict_host: bool = False            # 1.29.4: Host checked against RFC 3986
    cookie_semicolon_only: bool = False  # 1.29.6: $cookie_NAME splits at ";" only
    header_separator: bytes = b", "      # the joiner of repeated headers (a test changes it to show it matters)

    @staticmethod
    def for_version(version: str) -> "KeyRules":
        v = parse_version(version)
        return KeyRules(
            empty_path_query=v >= (1, 19, 6),
            strict_request_line=v >= (1, 21, 1),
            headers_joined=v >= (1, 23, 0),
            strict_host=v >= (1, 29, 4),
            cookie_semicolon_only=v >= (1, 29, 6),
        )


# Headers nginx allows once (§12.4: Content-Length, If-Match, Authorization, ...); Host is checked apart.
UNIQUE_HEADERS = {b"content-length", b"if-match", b"authorization", b"if-none-match", b"if-modified-since",
                  b"if-unmodified-since", b"transfer-encoding"}


@dataclass
class Request:
    """A request as sent: the head's bytes and the connection's addresses (``(ip, port)`` tuples)."""

    head: bytes
    client: tuple
    server: tuple
    scheme: str = "http"
    server_name: bytes = b""
    merge_slashes: bool = True


@dataclass
class Parsed:
    method: bytes = b""
    line: bytes = b""
    request_uri: bytes = b""
    uri: bytes = b""
    args: bytes = b""
    host: bytes | None = None
    headers: list = field(default_factory=list)  # (lower-case name, value), valid names only, in order


def split_head(head: bytes):
    """The request line and the header lines ``(name, value)``; leading empty lines are skipped."""
    lines = [l[:-1] if l.endswith(b"\r") else l for l in head.split(b"\n")]
    while lines and lines[0] == b"":
        lines.pop(0)
    if not lines:
        raise BadRequest(400, "no request line")
    line, headers = lines[0], []
    for l in lines[1:]:
        if l == b"":
            break
        name, _, value = l.partition(b":")
        headers.append((name, value.strip(b" \t")))
    return line, headers


def _is_hex(c: int) -> bool:
    return chr(c) in "0123456789abcdefABCDEF"


def parse_request_line(line: bytes, rules: KeyRules, p: Parsed, merge: bool):
    """§12.2: method, target (origin or absolute form), version."""
    i = 0
    while i < len(line) and line[i] != 0x20:
        c = line[i]
        if not (0x41 <= c <= 0x5A or c in b"_-"):
            raise BadRequest(400, "client sent invalid method")
        i += 1
    if i == 0 or i == len(line):
        raise BadRequest(400, "client sent invalid method")
    p.method = line[:i]
    while i < len(line) and line[i] == 0x20:
        i += 1
    # The version is the last word; the target is what lies between (a space inside the target stays in it
    # before 1.21.1 when not followed by "H", §12.2 item 3).
    rest = line[i:]
    end = rest.rstrip(b" ")
    j = end.rfind(b" H")
    if j < 0:
        raise BadRequest(400, "client sent invalid request")
    target, version = end[:j].rstrip(b" "), end[j + 1:]
    if not version.startswith(b"HTTP/"):
        raise BadRequest(400, "client sent invalid request")
    major, dot, minor = version[5:].partition(b".")
    if not (major.isdigit() and dot and minor.isdigit()):
        raise BadRequest(400, "client sent invalid request")
    if int(major) > 1:
        raise BadRequest(505, "client sent invalid version")
    for c in target:
        if c == 0 or (rules.strict_request_line and (c <= 0x20 or c == 0x7F)):
            raise BadRequest(400, "client sent invalid request")
    if target.startswith(b"/"):
        path = target
    else:
        scheme, sep, after = target.partition(b"://")
        if not sep or not scheme.isalpha():
            raise BadRequest(400, "client sent invalid request")
        k = 0
        while k < len(after) and after[k] not in b"/?":
            k += 1
        authority, path = after[:k], after[k:]
        if path.startswith(b"?"):
            if not rules.empty_path_query:
                raise BadRequest(400, "client sent invalid request")
        elif path == b"":
            path = b"/"
        p.host = validate_host(authority, rules, "client sent invalid host in request line", line=True)
    p.request_uri = path
    p.uri, p.args = uri_and_args(path if not path.startswith(b"?") else b"/" + path, merge)


def _decode_path(path: bytes):
    """Splits the target at the first undecoded ``?`` (``#`` ends the path and the query) and decodes the
    path's escapes: a decoded ``%``, ``#`` or ``?`` is a plain byte; any other decoded byte counts as sent."""
    out = bytearray()
    args = b""
    i = 0
    while i < len(path):
        c = path[i]
        if c == ord("?"):
            q = path[i + 1:]
            args = q.split(b"#", 1)[0]
            break
        if c == ord("#"):
            break
        if c == ord("%"):
            h = path[i + 1:i + 3]
            if len(h) != 2 or not (_is_hex(h[0]) and _is_hex(h[1])):
                raise BadRequest(400, "client sent invalid request")
            b = int(h, 16)
            if b == 0:
                raise BadRequest(400, "client sent invalid request")
            out.append(b)
            i += 3
            continue
        out.append(c)
        i += 1
    return bytes(out), args


def _resolve(path: bytes, merge: bool) -> bytes:
    """Merges slashes (if ``merge``) and resolves ``.`` and ``..`` segments; ``..`` above the root is a 400."""
    segments = path.split(b"/")[1:]
    stack: list = []
    trailing = False
    for n, seg in enumerate(segments):
        last = n == len(segments) - 1
        if seg == b"" and (merge or last):
            trailing = True
            continue
        if seg == b".":
            trailing = True
            continue
        if seg == b"..":
            if not stack:
                raise BadRequest(400, "client sent invalid request")
            stack.pop()
            trailing = True
            continue
        stack.append(seg)
        trailing = False
    if not stack:
        return b"/"
    return b"/" + b"/".join(stack) + (b"/" if trailing else b"")


def uri_and_args(path: bytes, merge: bool):
    decoded, args = _decode_path(path)
    return _resolve(decoded, merge), args


def validate_host(host: bytes, rules: KeyRules, why: str, line: bool = False) -> bytes:
    """§12.3: the host kept (lower-cased, no port, one trailing dot dropped) or a 400."""
    h = host
    port = b""
    if h.startswith(b"["):
        end = h.find(b"]")
        if end < 0:
            raise BadRequest(400, why)
        name, rest = h[:end + 1], h[end + 1:]
        if rest and not rest.startswith(b":"):
            raise BadRequest(400, why)
        port = rest[1:] if rest else b""
        has_port = bool(rest)
    else:
        name, colon, port = h.partition(b":")
        has_port = bool(colon)
    if b"/" in name or b"\0" in name or b".." in name:
        raise BadRequest(400, why)
    if rules.strict_request_line and any(c <= 0x20 or c == 0x7F for c in name):
        raise BadRequest(400, why)
    if line and b"_" in name:
        # The request-line authority is read by the request-line parser: letters, digits, "-", "." (and an IP
        # literal in brackets).
        raise BadRequest(400, why)
    if rules.strict_host:
        allowed = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~!$&'()*+,;=%")
        if not name.startswith(b"[") and any(c not in allowed for c in name):
            raise BadRequest(400, why)
        if has_port and (not port.isdigit() or int(port) > 65535):
            raise BadRequest(400, why)
    if name.endswith(b"."):
        name = name[:-1]
    if name == b"":
        raise BadRequest(400, why)
    return name.lower()


def parse(req: Request, rules: KeyRules) -> Parsed:
    """§12.2-§12.4: the request as nginx keeps it, or ``BadRequest``."""
    line, headers = split_head(req.head)
    p = Parsed(line=line)
    parse_request_line(line, rules, p, req.merge_slashes)
    host_lines = 0
    seen_unique = set()
    for name, value in headers:
        if b"\0" in name or b"\0" in value:
            raise BadRequest(400, "client sent invalid header line")
        if name == b"" or any(not (chr(c).isalnum() and c < 0x80) and c != ord("-") for c in name):
            continue  # ignore_invalid_headers on, underscores_in_headers off
        lower = name.lower()
        if lower in UNIQUE_HEADERS:
            if lower in seen_unique:
                raise BadRequest(400, "client sent duplicate header line")
            seen_unique.add(lower)
        if lower == b"host":
            host_lines += 1
            if host_lines > 1:
                raise BadRequest(400, "client sent duplicate host header")
            kept = validate_host(value, rules, "client sent invalid host header")
            if p.host is None:
                p.host = kept
        p.headers.append((lower, value))
    if host_lines == 0 and p.host is None and line.endswith(b"HTTP/1.1"):
        raise BadRequest(400, "client sent HTTP/1.1 request without \"Host\" header")
    return p


def _header(p: Parsed, name: bytes, rules: KeyRules) -> bytes | None:
    """$http_NAME (§12.4 item 2): "-" read as "_", case ignored; repeated lines joined since 1.23.0."""
    want = name.lower().replace(b"-", b"_")
    values = [v for n, v in p.headers if n.replace(b"-", b"_") == want]
    if not values:
        return None
    if want == b"cookie":
        return b"; ".join(values)
    if want == b"x_forwarded_for" or rules.headers_joined:
        return rules.header_separator.join(values)
    return values[0]


def _arg(args: bytes, name: bytes) -> bytes | None:
    """$arg_NAME (§12.4 item 4): the first NAME= at the start or after "&", caseless; not decoded."""
    for pair in args.split(b"&"):
        if len(pair) > len(name) and pair[:len(name)].lower() == name.lower() and pair[len(name)] == ord("="):
            return pair[len(name) + 1:]
    return None


def _cookie(p: Parsed, name: bytes, rules: KeyRules) -> bytes | None:
    """$cookie_NAME (§12.4 item 3)."""
    seps = b";" if rules.cookie_semicolon_only else b";,"
    name = name.lower()
    for n, line in p.headers:
        if n != b"cookie":
            continue
        i, end = 0, len(line)
        while i < end:
            if len(name) > end - i:
                break
            if line[i:i + len(name)].lower() == name:
                j = i + len(name)
                while j < end and line[j] == 0x20:
                    j += 1
                if j < end and line[j] == ord("="):
                    j += 1
                    while j < end and line[j] == 0x20:
                        j += 1
                    k = j
                    while k < end and line[k] != ord(";"):
                        k += 1
                    return line[j:k]
                i = j + 1  # the byte after the name is consumed
            # skip to the next separator, then spaces
            while i < end:
                c = line[i]
                i += 1
                if c in seps:
                    break
            while i < end and line[i] == 0x20:
                i += 1
    return None


def _addr_text(a) -> bytes:
    return str(ipaddress.ip_address(a[0])).encode()


def variable(name: str, p: Parsed, req: Request, rules: KeyRules) -> bytes:
    """One variable's value (b"" when it has none)."""
    n = name.lower()
    simple = {
        "request_uri": lambda: p.request_uri,
        "uri": lambda: p.uri,
        "document_uri": lambda: p.uri,
        "args": lambda: p.args,
        "query_string": lambda: p.args,
        "is_args": lambda: b"?" if p.args else b"",
        "host": lambda: p.host if p.host is not None else req.server_name,
        "server_name": lambda: req.server_name,
        "remote_addr": lambda: _addr_text(req.client),
        "binary_remote_addr": lambda: ipaddress.ip_address(req.client[0]).packed,
        "remote_port": lambda: str(req.client[1]).encode(),
        "server_addr": lambda: _addr_text(req.server),
        "server_port": lambda: str(req.server[1]).encode(),
        "scheme": lambda: req.scheme.encode(),
        "request_method": lambda: p.method,
        "request": lambda: p.line,
        "content_type": lambda: _header(p, b"content_type", rules) or b"",
    }
    if n in simple:
        return simple[n]()
    if n.startswith("http_") and len(n) > 5:
        return _header(p, n[5:].encode(), rules) or b""
    if n.startswith("arg_") and len(n) > 4:
        return _arg(p.args, n[4:].encode()) or b""
    if n.startswith("cookie_") and len(n) > 7:
        return _cookie(p, n[7:].encode(), rules) or b""
    raise Unsupported(f"${name} is not modelled by this port")


def parse_expression(expr: str):
    """§12.1: literal bytes and variables (``$name``, ``${name}``), in order: ``[("lit", b".."), ("var", "n")]``."""
    parts, i, lit = [], 0, bytearray()
    while i < len(expr):
        if expr[i] != "$":
            lit += expr[i].encode()
            i += 1
            continue
        if lit:
            parts.append(("lit", bytes(lit)))
            lit = bytearray()
        i += 1
        if i < len(expr) and expr[i] == "{":
            end = expr.find("}", i)
            if end < 0:
                raise ValueError(f'the closing bracket in "{expr[i + 1:]}" variable is missing')
            parts.append(("var", expr[i + 1:end]))
            i = end + 1
            continue
        j = i
        while j < len(expr) and (expr[j].isascii() and (expr[j].isalnum() or expr[j] == "_")):
            j += 1
        if j == i:
            raise ValueError("invalid variable name")
        parts.append(("var", expr[i:j]))
        i = j
    if lit:
        parts.append(("lit", bytes(lit)))
    return parts


def evaluate(expr: str, p: Parsed, req: Request, rules: KeyRules) -> bytes:
    """The bytes of ``expr`` for the parsed request."""
    out = bytearray()
    for kind, v in parse_expression(expr):
        out += v if kind == "lit" else variable(v, p, req, rules)
    return bytes(out)
