"""Setting value checks: Go ParseBool booleans (bad text is an error that names it), blanks, images."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from gpustack_operator.settings.admission import (
    check_container_registry,
    check_image_reference,
    is_blank,
    parse_bool,
)


def verdict(check: Callable[[str], None], text: str) -> str:
    """The word accepted, or the error a user would see (so a wrong refusal fails with its message)."""
    try:
        check(text)
    except ValueError as exc:
        return str(exc)
    return "accepted"


@pytest.mark.parametrize("text", ["1", "t", "T", "TRUE", "true", "True"])
def test_go_true_spellings(text: str) -> None:
    assert parse_bool(text) is True


@pytest.mark.parametrize("text", ["0", "f", "F", "FALSE", "false", "False"])
def test_go_false_spellings(text: str) -> None:
    assert parse_bool(text) is False


@pytest.mark.parametrize("text", ["yes", "no", "on", "tRUE", " true", "true ", "", "2", "ture"])
def test_any_other_text_is_an_error_naming_it(text: str) -> None:
    with pytest.raises(ValueError, match="is not a boolean") as caught:
        parse_bool(text)
    assert repr(text) in str(caught.value)


@pytest.mark.parametrize(
    ("text", "blank"), [("", True), ("  ", True), ("{}", True), (" [] ", True), ("x", False)]
)
def test_blank_is_empty_object_or_list(text: str, blank: bool) -> None:
    assert is_blank(text) is blank


@pytest.mark.parametrize(
    "text", ["docker.io", "registry.example.com:5000", "localhost:5000", "[::1]:5000", "harbor"]
)
def test_registries_accepted(text: str) -> None:
    assert verdict(check_container_registry, text) == "accepted"


@pytest.mark.parametrize("text", ["", "docker.io/library", "-bad.io", "host:port", "https://docker.io"])
def test_registries_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a container registry"):
        check_container_registry(text)


@pytest.mark.parametrize(
    "text",
    [
        "gpustack/ssh-server:v1.3.0",
        "ubuntu",
        "docker.io/library/ubuntu:22.04",
        "localhost:5000/team/app",
        "registry.example.com:5000/a/b:c",
        "quay.io/app@sha256:" + "a" * 64,
        "app:1.0@sha256:" + "0" * 64,
    ],
)
def test_image_references_accepted(text: str) -> None:
    assert verdict(check_image_reference, text) == "accepted"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "bad repository path"),
        ("Gpustack/ssh-server", "bad repository path"),
        ("gpustack/ssh-server:", "bad tag"),
        ("gpustack/ssh-server:-v1", "bad tag"),
        ("app@sha256:short", "bad digest"),
        ("bad_host.io:x/app", "bad registry"),
        ("a" * 256, "name longer than 255"),
    ],
)
def test_image_references_refused_with_the_reason(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_image_reference(text)
