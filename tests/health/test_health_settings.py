"""Tests of chash.health.settings: every setting is checked once, in
HealthSettings, and both runners reject the same bad values with the same
errors."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import pytest

from _support.health_checks import HAVE_AIOHTTP
from _support.waiting import run
from chash import ConsistentHashRouter
from chash.health import AsyncHealthChecker, HealthChecker
from chash.health.settings import HealthSettings

# One bad value per setting, with the exact error it raises.
BAD: list[tuple[dict[str, Any], type[Exception], str]] = [
    ({"url": "http://{host}/health"}, ValueError,
     "url template 'http://{host}/health' may only use {node}"),
    ({"url": "http://{0}/health"}, ValueError, "url template 'http://{0}/health' may only use {node}"),
    ({"url": 42}, TypeError, "url must be a template string or a callable, not 42"),
    ({"interval": 0}, ValueError, "interval must be a positive number of seconds, not 0"),
    ({"interval": "5"}, ValueError, "interval must be a positive number of seconds, not '5'"),
    ({"timeout": -1}, ValueError, "timeout must be a positive number of seconds, not -1"),
    ({"timeout": float("inf")}, ValueError, "timeout must be a positive number of seconds, not inf"),
    ({"timeout": float("nan")}, ValueError, "timeout must be a positive number of seconds, not nan"),
    ({"fall": 0}, ValueError, "fall must be an integer >= 1, not 0"),
    ({"fall": 1.5}, ValueError, "fall must be an integer >= 1, not 1.5"),
    ({"rise": True}, ValueError, "rise must be an integer >= 1, not True"),
    ({"rise": 0}, ValueError, "rise must be an integer >= 1, not 0"),
    ({"on_change": "print"}, TypeError, "on_change must be callable, not 'print'"),
    ({"panic_threshold": 2}, ValueError, "panic_threshold must be between 0 and 1, not 2"),
    ({"panic_threshold": -0.1}, ValueError, "panic_threshold must be between 0 and 1, not -0.1"),
    ({"panic_threshold": float("nan")}, ValueError, "panic_threshold must be between 0 and 1, not nan"),
    ({"max_concurrency": 0}, ValueError, "max_concurrency must be an integer >= 1, not 0"),
    ({"max_concurrency": False}, ValueError, "max_concurrency must be an integer >= 1, not False"),
]
BAD_IDS = [f"{next(iter(kwargs))}={next(iter(kwargs.values()))!r}" for kwargs, _, _ in BAD]


def test_the_settings_are_the_runners_keywords() -> None:
    # Less the router, the membership and the TLS context: collaborators,
    # not settings.
    fields = {field.name: field.default for field in dataclasses.fields(HealthSettings)}
    for runner in (HealthChecker, AsyncHealthChecker):
        parameters = inspect.signature(runner).parameters
        assert list(parameters) == ["router", "url", "interval", "timeout", "fall", "rise",
                                    "on_change", "membership", "healthy_statuses",
                                    "panic_threshold", "max_concurrency", "ssl_context"]
        keywords = {name: p.default for name, p in parameters.items()
                    if p.kind is inspect.Parameter.KEYWORD_ONLY
                    and name not in ("membership", "ssl_context")}
        assert keywords == fields, runner.__name__
        assert parameters["membership"].default is None
        assert parameters["ssl_context"].default is None


def test_every_setting_is_validated() -> None:
    # Any Container[int] will do for healthy_statuses: nothing to check.
    settings = {field.name for field in dataclasses.fields(HealthSettings)}
    assert {next(iter(kwargs)) for kwargs, _, _ in BAD} == settings - {"healthy_statuses"}


@pytest.mark.parametrize("kwargs, error, message", BAD, ids=BAD_IDS)
def test_a_bad_setting_is_rejected_naming_it(kwargs: dict[str, Any], error: type[Exception],
                                             message: str) -> None:
    with pytest.raises(error) as info:
        HealthSettings(**kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize("kwargs, error, message", BAD, ids=BAD_IDS)
def test_both_runners_reject_the_same_bad_values(kwargs: dict[str, Any], error: type[Exception],
                                                 message: str) -> None:
    runners: list[type[Any]] = [HealthChecker]
    if HAVE_AIOHTTP:
        runners.append(AsyncHealthChecker)
    for runner in runners:
        with pytest.raises(error) as info:
            runner(ConsistentHashRouter(), **kwargs)
        assert (type(info.value), str(info.value)) == (error, message), runner.__name__
    if not HAVE_AIOHTTP:
        pytest.skip("the async runner needs aiohttp (chash-router[async])")


@pytest.mark.parametrize("kwargs, error", [
    ({"interval": 0}, ValueError), ({"timeout": -1}, ValueError),
    ({"timeout": float("inf")}, ValueError), ({"fall": 0}, ValueError),
    ({"rise": 0}, ValueError), ({"panic_threshold": 2}, ValueError),
    ({"max_concurrency": 0}, ValueError), ({"url": "http://{host}/health"}, ValueError),
    ({"url": 42}, TypeError), ({"on_change": "print"}, TypeError),
])
def test_bad_configuration_is_rejected(kwargs: dict[str, Any], error: type[Exception]) -> None:
    with pytest.raises(error):
        HealthChecker(ConsistentHashRouter(), **kwargs)


def test_the_defaults_are_the_runners_defaults() -> None:
    settings = HealthSettings()
    checker = HealthChecker(ConsistentHashRouter())
    assert (checker.interval, checker.timeout, checker.fall, checker.rise,
            checker.panic_threshold) == (settings.interval, settings.timeout, settings.fall,
                                         settings.rise, settings.panic_threshold)
    assert (settings.interval, settings.timeout, settings.fall, settings.rise,
            settings.panic_threshold, settings.max_concurrency) == (5.0, 2.0, 3, 2, 0.5, 64)
    assert settings.healthy_statuses == range(200, 300) and settings.on_change is None
    assert checker.url_for("10.0.0.1:80") == settings.url_for("10.0.0.1:80") == \
        "http://10.0.0.1:80/health"


def test_numbers_are_stored_as_floats_and_settings_are_frozen() -> None:
    settings = HealthSettings(interval=1, timeout=3, panic_threshold=1)
    assert [type(v) for v in (settings.interval, settings.timeout, settings.panic_threshold)] \
        == [float, float, float]
    assert settings == HealthSettings(interval=1.0, timeout=3.0, panic_threshold=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.interval = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        HealthSettings(5.0)  # type: ignore[call-arg,arg-type]  # keywords only


def test_url_for_takes_a_template_or_a_callable() -> None:
    assert HealthSettings(url="https://{node}:8443/ready?deep=1").url_for("b") == \
        "https://b:8443/ready?deep=1"
    assert HealthSettings(url=lambda node: f"http://{node.upper()}/").url_for("b") == "http://B/"


def test_the_async_runner_takes_the_same_keywords() -> None:
    pytest.importorskip("aiohttp", reason="the async runner needs aiohttp (chash-router[async])")

    async def main() -> None:
        checker = AsyncHealthChecker(ConsistentHashRouter(), interval=1, timeout=0.5, fall=4,
                                     rise=5, panic_threshold=0, max_concurrency=3,
                                     url="http://{node}/ready")
        assert (checker.interval, checker.timeout, checker.fall, checker.rise,
                checker.panic_threshold) == (1.0, 0.5, 4, 5, 0.0)
        assert checker.url_for("a") == "http://a/ready"
        await checker.aclose()

    run(main())
