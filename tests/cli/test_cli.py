"""The ``chash`` command as a whole: one type for one kind of argument,
help, version, the output's wording, ``simulate --plot``.  The types
themselves are tested in test_cli_args.py, the wording of counts in
test_text.py."""
from __future__ import annotations

import argparse
import logging
import re
import subprocess
import sys
from pathlib import Path

import pytest

import chash
from _support.plotting import need_matplotlib
from chash import ConsistentHashRouter
from chash.cli import SUBCOMMANDS, build_parser, main
from chash.cli.args import positive_int
from chash.simulate import SimulationConfig, plot_figure, plot_path, simulate

# -- one type for one kind of argument -----------------------------------------------


def _actions(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("no subcommands")


def test_every_subcommand_is_registered() -> None:
    assert set(_actions(build_parser())) == set(SUBCOMMANDS)


@pytest.mark.parametrize(("command", "option"), [
    ("route", "-n"), ("gateway", "--attempts"), ("gateway", "--fall"), ("gateway", "--rise"),
    ("simulate", "--keys"), ("simulate", "--maglev-size"), ("spread", "--keys"), ("spread", "--vnodes"),
])
def test_positive_counts_share_one_type(command: str, option: str) -> None:
    sub = _actions(build_parser())[command]
    (action,) = [a for a in sub._actions if option in a.option_strings]
    assert action.type is positive_int


@pytest.mark.parametrize(("argv", "message"), [
    (["spread", "--keys", "0"], "argument --keys: must be >= 1, not 0"),
    (["spread", "--keys", "many"], "argument --keys: not a whole number: 'many'"),
    (["spread", "--vnodes", "-2"], "argument --vnodes: must be >= 1, not -2"),
    (["simulate", "--keys", "0"], "argument --keys: must be >= 1, not 0"),
    (["gateway", "--backend", "127.0.0.1:1", "--attempts", "0"], "argument --attempts: must be >= 1, not 0"),
    (["gateway", "--backend", "127.0.0.1:1", "--health-interval", "0"],
     "argument --health-interval: must be a positive number of seconds, not 0"),
    (["route", "k", "--nodes", "a", "--vnodes", "2000000"], "argument --vnodes: must be <= 1,000,000"),
])
def test_bad_counts_exit_2_naming_the_option(argv: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    captured = capsys.readouterr()
    assert message in captured.err
    assert captured.out == ""


# -- help, version, defaults ------------------------------------------------------


def test_bare_chash_prints_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("usage: chash")
    for name in SUBCOMMANDS:
        assert f"    {name} " in captured.out
    assert "keys over" not in captured.out  # the spread did not run
    assert captured.err == ""


def test_python_dash_m_is_the_same_command() -> None:
    result = subprocess.run([sys.executable, "-m", "chash"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert result.stdout.startswith("usage: chash")


def test_a_reader_going_away_ends_the_command_quietly() -> None:
    """``chash route ... | head -1``: no BrokenPipeError traceback, the
    status of a program ended by SIGPIPE."""
    keys = [str(i) for i in range(30_000)]  # far more output than a pipe holds
    proc = subprocess.Popen([sys.executable, "-m", "chash", "route", "--nodes", "a,b,c", *keys],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline().startswith(b"key")
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 141
    assert err == b""


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out == f"chash {chash.__version__}\n"


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_every_subcommand_has_a_description(command: str) -> None:
    parser = _actions(build_parser())[command]
    assert parser.description and len(parser.description) > 40
    assert " ".join(parser.description.split()[:4]) in " ".join(parser.format_help().split())


def test_route_and_the_readme_example_agree() -> None:
    # The README's first example builds ConsistentHashRouter() and routes
    # user_7; chash route with no --vnodes must give the same ring.
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    constructor = re.search(r"router = ConsistentHashRouter\((.*)\)", example)
    assert constructor and constructor.group(1) == "", "the first example uses the defaults"
    answer = re.search(r'get_target_node\("user_7"\)\s+# \'([^\']+)\'', example)
    assert answer
    router = ConsistentHashRouter()
    for node in ("order-service-v1", "order-service-v2", "order-service-v3"):
        router.add_service_node(node)
    assert router.get_target_node("user_7") == answer.group(1)
    vnodes = _actions(build_parser())["route"].get_default("vnodes")
    assert ConsistentHashRouter(vnodes).virtual_node_count == router.virtual_node_count


# -- counts read right ----------------------------------------------------------------


def test_route_with_one_node(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["route", "k", "--nodes", "only", "--vnodes", "1"]) == 0
    out = capsys.readouterr().out
    assert "(1 node, 1 virtual node per weight 1, md5 hash, python layout)" in out
    assert main(["route", "k", "--nodes", "a,b"]) == 0
    assert "(2 nodes, 100 virtual nodes per weight 1," in capsys.readouterr().out


def test_spread_with_one_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["spread", "--keys", "1", "--vnodes", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("1 key over 3 nodes (1 virtual node each)")
    assert main(["spread", "--keys", "2000", "--vnodes", "50"]) == 0
    assert capsys.readouterr().out.startswith("2,000 keys over 3 nodes (50 virtual nodes each)")


def test_simulate_with_one_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--keys", "1", "--nodes", "2:3", "--vnodes", "1", "--ring-vnodes", "1",
                 "--bounded-vnodes", "1", "--maglev-size", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("chash simulate: 1 key, 2 -> 3 nodes")
    assert "(3 nodes, 1 key;" in out
    assert not re.search(r"\b1 (keys|nodes)\b", out)


def test_gateway_log_names_one_backend(caplog: pytest.LogCaptureFixture) -> None:
    pytest.importorskip("aiohttp", reason="the gateway extra (aiohttp) is not installed")
    from _support.waiting import run
    from chash.gateway import Gateway, GatewayConfig

    async def main_() -> None:
        gateway = Gateway({"a": "127.0.0.1:1"}, GatewayConfig(health=False, metrics=False))
        await gateway.start("127.0.0.1", 0)
        await gateway.stop()

    with caplog.at_level(logging.INFO, logger="chash.gateway"):
        run(main_())
    assert any(record.getMessage().endswith(", 1 backend") for record in caplog.records), caplog.text


# -- simulate --plot ------------------------------------------------------------------

PLOT_RUN = ["simulate", "--keys", "2000", "--nodes", "3:5", "--vnodes", "50"]


def test_plot_without_an_extension_reports_the_png_it_wrote(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    need_matplotlib()
    assert main([*PLOT_RUN, "--plot", str(tmp_path / "out")]) == 0
    written = tmp_path / "out.png"
    assert capsys.readouterr().err == f"chash simulate: wrote {written}\n"
    assert written.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "out").exists()


def test_plot_in_another_format_keeps_its_name(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    need_matplotlib()
    assert main([*PLOT_RUN, "--plot", str(tmp_path / "out.svg")]) == 0
    assert capsys.readouterr().err == f"chash simulate: wrote {tmp_path / 'out.svg'}\n"
    assert b"<svg" in (tmp_path / "out.svg").read_bytes()[:2000]


def test_plot_format_unknown_fails_before_measuring(capsys: pytest.CaptureFixture[str],
                                                    tmp_path: Path) -> None:
    need_matplotlib()
    assert main([*PLOT_RUN, "--plot", str(tmp_path / "out.xyz")]) == 2
    captured = capsys.readouterr()
    assert "chash simulate: error: --plot: cannot draw a '.xyz' file: use one of" in captured.err
    assert ".png" in captured.err and captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_plot_path() -> None:
    need_matplotlib()
    assert plot_path("a/b") == "a/b.png"
    assert plot_path("a.b/c") == "a.b/c.png"
    assert plot_path("x.PNG") == "x.PNG"
    assert plot_path("x.pdf") == "x.pdf"
    with pytest.raises(ValueError, match=r"cannot draw a '\.txt' file"):
        plot_path("x.txt")


@pytest.mark.parametrize("hash_name", ["md5", "xxh3"])
def test_remap_plot_shows_every_series_and_names_keys_and_hash(hash_name: str) -> None:
    need_matplotlib()
    result = simulate(SimulationConfig(keys=2500, first_nodes=3, last_nodes=7, balance_vnodes=(10, 50),
                                       hash=hash_name))
    figure = plot_figure(result)
    growth = result["remap"]["growth"]
    ideal = [step["ideal"] for step in growth]
    panels = {ax.get_title(): ax for ax in figure.get_axes() if ax.get_visible() and ax.get_title()}
    strategies = result["strategies"]
    assert len(strategies) + 1 == 12  # eleven strategies and the ideal: twelve series
    for strategy in strategies:
        # Each strategy has a panel of its own, with the ideal 1/N drawn over it.
        ax = panels[strategy["label"]]
        moved, reference = ax.get_lines()
        assert list(moved.get_ydata()) == [step["moved"][strategy["id"]] for step in growth]
        assert list(reference.get_ydata()) == ideal
        assert moved.get_label() == strategy["label"] and reference.get_label() == "ideal 1/N"
    # The two load panels; nothing else is visible with a title.
    assert len(panels) == len(strategies) + 2
    titles = [sub.get_suptitle() for sub in figure.subfigs]
    assert f"Keys remapped as the cluster grows (2,500 keys, hash {hash_name})" in titles
