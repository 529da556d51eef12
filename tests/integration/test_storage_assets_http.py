"""OpenMAIC's asset contract (``@openmaic/storage`` ``test/asset-contract.ts`` and ``http-asset-store.test.ts``)
ported case by case, over real sockets against `openmaic serve`: each test is named after the clause it checks.
Cases about the browser client alone (its URL cache, signed-URL egress, allocator seams) have no server side and
are left out."""

from __future__ import annotations

import base64
import hashlib
import re

import httpx
import trio

from tests.integration.storage_harness import storage_server_fixture

storage_server = storage_server_fixture("limits: {asset_bytes_per_owner: 200000}\n")

ID = re.compile(r"^ast_[a-z2-7]{26}$")
FOREIGN_IDS = [
    ("empty string", ""), ("whitespace", "   "), ("bare prefix", "ast_"), ("4 KiB of padding", "ast_" + "x" * 4096),
    ("bucket/path shape", "bucket/path/to/object.png"),
    ("legacy content-addressed ref", "sha256-deadbeefdeadbeefdeadbeefdeadbeef"),
    ("embedded NUL", "ast_before\x00after"), ("path traversal shape", "../../etc/passwd"),
    ("non-ASCII", "ast_\u00e9-\u4e2d-\U0001f600"), ("newline", "ast_a\nb"),
]


def multipart(parts: list[dict]) -> tuple[bytes, str]:
    """A multipart body of ``parts`` ({name, value, contentType?, filename?: None for none}) as given, in order."""
    boundary = "openmaic-test-boundary"
    out = b""
    for p in parts:
        value = p["value"].encode() if isinstance(p["value"], str) else p["value"]
        disposition = f'form-data; name="{p["name"]}"'
        filename = p.get("filename", "blob")
        if filename is not None:
            disposition += f'; filename="{filename}"'
        out += f"--{boundary}\r\nContent-Disposition: {disposition}\r\n".encode()
        out += f"Content-Type: {p.get('contentType', 'application/octet-stream')}\r\n\r\n".encode() + value + b"\r\n"
    return out + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def write(data: bytes | str, content_type: str = "application/octet-stream", meta: str | None = "{}") -> dict:
    parts = ([{"name": "meta", "value": meta, "contentType": "application/json", "filename": "meta.json"}]
             if meta is not None else [])
    body, ctype = multipart([*parts, {"name": "bytes", "value": data, "contentType": content_type}])
    return {"content": body, "headers": {"Content-Type": ctype}}


def path_of(asset_id: str, content: bool = True) -> str:
    from urllib.parse import quote
    return f"/assets/{quote(asset_id, safe='')}" + ("/content" if content else "")


async def put(c, data: bytes | str, content_type: str = "application/octet-stream", meta: str | None = "{}") -> str:
    r = await c.post("/assets", **write(data, content_type, meta))
    assert r.status_code == 201 and r.headers["x-asset-revision"] == "1", r.text
    return r.json()["id"]


async def bytes_at(c, asset_id: str) -> bytes | None:
    r = await c.get(path_of(asset_id))
    if r.status_code == 404:
        assert r.json()["error"]["code"] == "ASSET_NOT_FOUND" and r.headers["x-error-code"] == "ASSET_NOT_FOUND"
        return None
    assert r.status_code == 200, r.text
    return r.content


async def remove(c, asset_id: str) -> None:
    r = await c.delete(path_of(asset_id, content=False))
    assert r.status_code == 204, r.text


def refused(r, status: int, code: str | None) -> None:
    assert r.status_code == status, (r.status_code, r.text)
    if code is not None:
        assert r.headers["x-error-code"] == code, r.headers
        if r.request.method != "HEAD":
            assert r.json()["error"]["code"] == code, r.text


async def test_put_returns_a_non_empty_id(storage_server):
    async with storage_server.visitor() as c:
        assert ID.match(await put(c, "hello"))


async def test_allocated_ids_contain_no_digest_substring_in_common_encodings(storage_server):
    async with storage_server.visitor() as c:
        data = b"digest probe bytes"
        asset_id = await put(c, data)
        digest = hashlib.sha256(data).digest()
        for form in (digest.hex(), base64.b64encode(digest).decode(), base64.urlsafe_b64encode(digest).decode(),
                     base64.b32encode(digest).decode().lower()):
            assert all(form[i:i + 8] not in asset_id for i in range(len(form) - 8)), form


async def test_allocated_id_width_is_independent_of_payload_size(storage_server):
    async with storage_server.visitor() as c:
        assert len(await put(c, b"abc")) == len(await put(c, b"x" * 65536))


async def test_ids_are_allocated_identical_bytes_yield_distinct_ids(storage_server):
    async with storage_server.visitor() as c:
        assert await put(c, "same") != await put(c, "same")


async def test_every_put_allocates_n_puts_of_identical_bytes_yield_n_distinct_ids(storage_server):
    async with storage_server.visitor() as c:
        assert len({await put(c, "five times") for _ in range(5)}) == 5


async def test_distinct_bytes_yield_distinct_ids(storage_server):
    async with storage_server.visitor() as c:
        assert await put(c, "a") != await put(c, "b")


async def test_each_id_of_the_same_bytes_resolves_to_those_bytes(storage_server):
    async with storage_server.visitor() as c:
        a, b = await put(c, "shared bytes"), await put(c, "shared bytes")
        assert await bytes_at(c, a) == await bytes_at(c, b) == b"shared bytes"


async def test_concurrent_puts_of_identical_bytes_allocate_distinct_resolvable_ids(storage_server):
    async with storage_server.visitor() as c:
        ids: list[str] = []

        async def one() -> None:
            ids.append(await put(c, "racing bytes"))

        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(one)
        assert len(set(ids)) == 8
        for asset_id in ids:
            assert await bytes_at(c, asset_id) == b"racing bytes"


async def test_successful_put_paths_do_not_disclose_whether_bytes_already_existed(storage_server):
    async with storage_server.visitor() as c:
        await put(c, "pre-existing bytes")

        async def observe(data: str) -> tuple:
            r = await c.post("/assets", **write(data))
            asset_id = r.json()["id"]
            got = await bytes_at(c, asset_id)
            await remove(c, asset_id)
            headers = sorted((k, v) for k, v in r.headers.items() if k not in ("date", "content-length", "set-cookie"))
            return (r.status_code, headers, bool(ID.match(asset_id)), got == data.encode(),
                    await bytes_at(c, asset_id))

        assert await observe("pre-existing bytes") == await observe("brand new bytes!!") == (
            201, (await observe("third bytes, new"))[1], True, True, None)


async def test_removing_one_id_leaves_the_other_ids_of_the_same_bytes_resolvable(storage_server):
    async with storage_server.visitor() as c:
        a, b = await put(c, "two owners"), await put(c, "two owners")
        await remove(c, a)
        assert await bytes_at(c, a) is None and await bytes_at(c, b) == b"two owners"


async def test_removing_every_id_of_some_bytes_leaves_them_unresolvable(storage_server):
    async with storage_server.visitor() as c:
        ids = [await put(c, "gone") for _ in range(3)]
        for asset_id in ids:
            await remove(c, asset_id)
        assert [await bytes_at(c, i) for i in ids] == [None] * 3


async def test_remove_is_idempotent_and_resolve_returns_null_after_remove(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, "once")
        await remove(c, asset_id)
        await remove(c, asset_id)
        assert await bytes_at(c, asset_id) is None


async def test_removing_one_asset_leaves_an_unrelated_asset_untouched(storage_server):
    async with storage_server.visitor() as c:
        a, b = await put(c, "victim"), await put(c, "bystander")
        await remove(c, a)
        assert await bytes_at(c, b) == b"bystander"


async def test_unknown_ids_are_misses_not_errors(storage_server):
    async with storage_server.visitor() as c:
        kept = await put(c, "untouched")
        for label, asset_id in FOREIGN_IDS:
            if asset_id == "":
                continue  # unsendable: the client resolves it locally as a miss
            assert await bytes_at(c, asset_id) is None, label
            await remove(c, asset_id)
        assert await bytes_at(c, kept) == b"untouched"


async def test_metadata_does_not_merge_assets_same_bytes_different_meta_two_ids(storage_server):
    async with storage_server.visitor() as c:
        a = await put(c, "same pixels", meta='{"prompt": "a cat"}')
        b = await put(c, "same pixels", meta='{"prompt": "a dog"}')
        assert a != b and await bytes_at(c, a) == await bytes_at(c, b) == b"same pixels"


async def test_an_empty_meta_object_is_accepted(storage_server):
    async with storage_server.visitor() as c:
        assert await bytes_at(c, await put(c, "empty meta", meta="{}")) == b"empty meta"


# -- the HTTP contract (http-asset-store.test.ts) ------------------------------------------------------------


async def test_http_replace_advances_the_revision_and_serves_the_new_bytes(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, "v1", "image/png")
        for revision in ("2", "3"):
            r = await c.put(path_of(asset_id), **write(f"v{revision}", "image/png", meta=None))
            assert r.status_code == 204 and r.headers["x-asset-revision"] == revision, r.text
        r = await c.get(path_of(asset_id))
        assert (r.content, r.headers["x-asset-revision"]) == (b"v3", "3")
        r = await c.head(path_of(asset_id))
        assert r.headers["x-asset-revision"] == "3"


async def test_http_head_and_get_have_identical_headers_for_owned_and_missing_ids(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, b"\x89PNG head", "image/png")

        def comparable(r: httpx.Response) -> tuple:
            return r.status_code, sorted((k, v) for k, v in r.headers.items() if k not in ("date", "set-cookie"))

        for target in (asset_id, "ast_never_allocated"):
            get, head = await c.get(path_of(target)), await c.head(path_of(target))
            assert comparable(get)[0] == comparable(head)[0]
            if get.status_code == 200:
                assert comparable(get) == comparable(head) and head.content == b""


async def test_http_foreign_absent_deleted_and_malformed_ids_are_indistinguishable_on_every_id_route(storage_server):
    async with storage_server.visitor() as owner, storage_server.visitor() as other:
        own = await put(owner, "own")
        foreign = await put(other, "foreign")
        deleted = await put(owner, "deleted")
        await remove(owner, deleted)
        ids = [foreign, "ast_never_allocated", deleted, "not-an-asset-id", "bucket/path/to/object.png"]
        for method in ("GET", "HEAD", "PUT", "DELETE"):
            seen = set()
            for asset_id in ids:
                kwargs = write("replacement", "text/plain", meta=None) if method == "PUT" else {}
                r = await owner.request(method, path_of(asset_id, content=method != "DELETE"), **kwargs)
                seen.add((r.status_code, r.content, r.headers.get("x-error-code"), r.headers.get("content-type")))
            assert len(seen) == 1, (method, seen)
            kwargs = write("own replacement", "text/plain", meta=None) if method == "PUT" else {}
            r = await owner.request(method, path_of(own, content=method != "DELETE"), **kwargs)
            assert r.status_code == (200 if method in ("GET", "HEAD") else 204), (method, r.text)
        assert await bytes_at(other, foreign) == b"foreign"


async def test_http_query_strings_are_rejected_on_all_five_routes(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, "query target")
        for method, path in (("POST", "/assets?x=1"), ("GET", f"/assets/{asset_id}/content?x=1"),
                             ("HEAD", f"/assets/{asset_id}/content?y"), ("PUT", f"/assets/{asset_id}/content?x=1"),
                             ("DELETE", f"/assets/{asset_id}?x=1")):
            kwargs = write("x") if method in ("POST", "PUT") else {}
            refused(await c.request(method, path, **kwargs), 400, "VALIDATION_FAILED")
        assert await bytes_at(c, asset_id) == b"query target"


async def test_http_get_head_and_delete_reject_request_bodies(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, "bodyless")
        for method, path in (("GET", path_of(asset_id)), ("HEAD", path_of(asset_id)),
                             ("DELETE", path_of(asset_id, content=False))):
            refused(await c.request(method, path, content=b"smuggled"), 400, "VALIDATION_FAILED")
        assert await bytes_at(c, asset_id) == b"bodyless"


async def test_http_rejects_hostile_multipart_shapes_without_writing(storage_server):
    meta = {"name": "meta", "value": "{}", "contentType": "application/json"}
    cases = [
        [meta, meta, {"name": "bytes", "value": "a"}],
        [meta, {"name": "bytes", "value": "a"}, {"name": "bytes", "value": "b"}],
        [meta, {"name": "extra", "value": "x"}, {"name": "bytes", "value": "a"}],
        [meta],
        [{"name": "bytes", "value": "a"}, meta],
        [{**meta, "filename": None}, {"name": "bytes", "value": "a"}],
        [{**meta, "contentType": "text/plain"}, {"name": "bytes", "value": "a"}],
        [{**meta, "value": b"{\"a\": \"\xff\"}"}, {"name": "bytes", "value": "a"}],
        [meta, {"name": "bytes", "value": "a", "filename": None}],
        [{**meta, "value": "[1]"}, {"name": "bytes", "value": "a"}],
        [{**meta, "value": '{"x": -0}'}, {"name": "bytes", "value": "a"}],
        [{**meta, "value": '{"x": -0.0e3}'}, {"name": "bytes", "value": "a"}],
        [{**meta, "value": '{"x": "a\\u0000b"}'}, {"name": "bytes", "value": "a"}],
        [{**meta, "value": '{"principal": "me"}'}, {"name": "bytes", "value": "a"}],
        [{**meta, "value": '{"contentHash": "abc"}'}, {"name": "bytes", "value": "a"}],
    ]
    async with storage_server.visitor() as c:
        for parts in cases:
            body, ctype = multipart(parts)
            refused(await c.post("/assets", content=body, headers={"Content-Type": ctype}), 400, "VALIDATION_FAILED")
        r = await c.post("/assets", content=b"{}", headers={"Content-Type": "application/json"})
        refused(r, 415, "UNSUPPORTED_MEDIA_TYPE")
        r = await c.post("/assets", **{**write("x"), "headers": {**write("x")["headers"], "Content-Encoding": "gzip"}})
        refused(r, 400, "VALIDATION_FAILED")
        assert (await c.get("/documents")).status_code == 200  # the owner exists and stored nothing


async def test_http_exceeding_max_parts_is_a_payload_limit_not_a_validation_failure(storage_server):
    async with storage_server.visitor() as c:
        body, ctype = multipart([{"name": f"p{i}", "value": "x"} for i in range(9)])
        refused(await c.post("/assets", content=body, headers={"Content-Type": ctype}), 413, "PAYLOAD_TOO_LARGE")


async def test_http_wrong_methods_return_405_with_allow_and_assetsfoo_is_route_not_found(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, "methods")
        for method, path in (("GET", "/assets"), ("DELETE", path_of(asset_id)), ("POST", path_of(asset_id)),
                             ("PUT", path_of(asset_id, content=False))):
            r = await c.request(method, path)
            refused(r, 405, "METHOD_NOT_ALLOWED")
            assert r.headers["allow"], r.headers
        refused(await c.get("/assetsfoo"), 404, "ROUTE_NOT_FOUND")


async def test_http_byte_responses_enforce_safe_labels_and_required_headers(storage_server):
    async with storage_server.visitor() as c:
        for declared, served, attachment in (
                ("image/png", "image/png", False), ("AUDIO/MPEG", "audio/mpeg", False),
                ("text/html", "application/octet-stream", True), ("image/svg+xml", "application/octet-stream", True),
                ("application/javascript", "application/octet-stream", True),
                ("application/pdf", "application/octet-stream", True),
                ("image/png; charset=x", "application/octet-stream", True)):
            asset_id = await put(c, "<svg onload=alert(1)>", declared, meta=None if False else "{}")
            for r in (await c.get(path_of(asset_id), headers={"Range": "bytes=0-1"}), await c.head(path_of(asset_id))):
                assert r.status_code == 200, r.text
                assert r.headers["content-type"] == served, (declared, r.headers)
                assert ("content-disposition" in r.headers) == attachment
                assert r.headers["x-content-type-options"] == "nosniff"
                assert r.headers["cache-control"] == "private, no-store"
                assert r.headers["vary"] == "Cookie, Authorization"
                assert r.headers["x-asset-revision"] == "1"
                assert r.headers["content-length"] == str(len("<svg onload=alert(1)>"))
                for absent in ("etag", "last-modified", "age", "accept-ranges", "content-range"):
                    assert absent not in r.headers, (absent, r.headers)


async def test_http_meta_content_type_is_the_recorded_media_type(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, "pixels", "application/octet-stream", meta='{"contentType": "image/webp"}')
        assert (await c.get(path_of(asset_id))).headers["content-type"] == "image/webp"
        r = await c.put(path_of(asset_id), **write("other", "audio/ogg", meta=None))
        assert r.status_code == 204
        assert (await c.get(path_of(asset_id))).headers["content-type"] == "audio/ogg"


async def test_http_metadata_omitting_put_with_an_untyped_blob_uses_the_binary_default(storage_server):
    async with storage_server.visitor() as c:
        asset_id = await put(c, "typed", "image/png")
        body, ctype = multipart([{"name": "bytes", "value": "untyped", "contentType": "application/octet-stream"}])
        assert (await c.put(path_of(asset_id), content=body, headers={"Content-Type": ctype})).status_code == 204
        assert (await c.get(path_of(asset_id))).headers["content-type"] == "application/octet-stream"


async def test_http_no_digest_encoding_appears_in_response_headers_bodies_ids_or_error_messages(storage_server):
    async with storage_server.visitor() as c:
        data = b"digest leak probe"
        digest = hashlib.sha256(data).digest()
        forms = [digest.hex(), base64.b64encode(digest).decode().rstrip("="),
                 base64.urlsafe_b64encode(digest).decode().rstrip("=")]
        r1 = await c.post("/assets", **write(data, "image/png"))
        asset_id = r1.json()["id"]
        answers = [r1, await c.get(path_of(asset_id)), await c.head(path_of(asset_id)),
                   await c.put(path_of(asset_id), **write(data, "image/png", meta=None)),
                   await c.get(path_of("ast_never_allocated"))]
        for r in answers:
            text = " ".join(f"{k}: {v}" for k, v in r.headers.items()) + r.content.decode("latin-1")
            for form in forms:
                assert form[:16] not in text, (form, text)


async def test_http_owner_quota_is_asset_quota_exceeded(storage_server):
    async with storage_server.visitor() as c:
        await put(c, b"q" * 150_000)
        r = await c.post("/assets", **write(b"r" * 60_000))
        refused(r, 507, "ASSET_QUOTA_EXCEEDED")
        assert "limits.asset_bytes_per_owner" in r.json()["error"]["message"]
